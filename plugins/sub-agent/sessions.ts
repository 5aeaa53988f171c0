import type { SubagentCli } from '../../core/config.js'
import type { CliSession } from './types.js'
import { isObject, sessionId } from './json.js'
import { oneLine } from './text.js'

/*
 * Sessions of the active CLI (docs/contract.md#terminal), read from the CLI's own store in the sandbox user's
 * home by one python3 helper (the image's; without python3 the list is empty):
 *
 *   claude    ~/.claude/projects/<project>/<session id>.jsonl            (JSON lines: user, assistant, summary)
 *   codex     ~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl    (session_meta, turn_context, user messages;
 *             older rollouts: top-level messages)
 *   opencode  ~/.local/share/opencode/opencode.db (SQLite, table session) or, before 1.x,
 *             ~/.local/share/opencode/storage/session/<project>/<id>.json
 *
 * The helper lists without following links, reads only regular files through O_NOFOLLOW, at most the
 * head of each, and prints one JSON object per session; the server re-validates every field.
 */

export const MAX_SESSIONS = 20
const MAX_LABEL = 80

const LISTER = String.raw`
import json, os, stat, sys
cli, MAX, HEAD = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
home = os.path.expanduser('~')
def files(root, depth, prefix, suffix):
    found, stack = [], [(root, 0)]
    while stack and len(found) < 5000:
        d, lvl = stack.pop()
        try:
            entries = list(os.scandir(d))[:5000]
        except OSError:
            continue
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    if lvl + 1 < depth: stack.append((e.path, lvl + 1))
                elif e.is_file(follow_symlinks=False) and e.name.startswith(prefix) and e.name.endswith(suffix):
                    found.append((e.stat(follow_symlinks=False).st_mtime, e.path))
            except OSError:
                pass
    found.sort(reverse=True)
    return found[:MAX]
def head(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return b''
    try:
        return os.read(fd, HEAD) if stat.S_ISREG(os.fstat(fd).st_mode) else b''
    finally:
        os.close(fd)
def lines(path):
    out = []
    for line in head(path).decode('utf-8', 'replace').split('\n'):
        if line.startswith('{'):
            try:
                v = json.loads(line)
            except ValueError:
                continue
            if isinstance(v, dict): out.append(v)
    return out
def text(content):
    if isinstance(content, str): return content
    if isinstance(content, list):
        for p in content:
            if isinstance(p, dict) and p.get('type') in ('text', 'input_text') and isinstance(p.get('text'), str): return p['text']
    return None
def label(t):
    if not isinstance(t, str) or not t.strip() or t.lstrip().startswith('<') or t.startswith('Caveat:'): return None
    i = t.rfind('\n---\n')
    return t[i + 5:] if i != -1 else t
def emit(sid, model, ts, lab):
    print(json.dumps({'id': sid, 'model': model, 'ts': int(ts), 'label': (lab or '')[:400]}))
if cli == 'claude':
    for ts, path in files(os.path.join(home, '.claude/projects'), 2, '', '.jsonl'):
        sid, model, first, summary = os.path.basename(path)[:-6], None, None, None
        for v in lines(path):
            m = v.get('message') if isinstance(v.get('message'), dict) else {}
            if v.get('type') == 'summary' and summary is None: summary = v.get('summary')
            if v.get('type') == 'user' and first is None: first = label(text(m.get('content')))
            if v.get('type') == 'assistant' and model is None and isinstance(m.get('model'), str): model = m['model']
        emit(sid, model, ts, summary if isinstance(summary, str) else first)
elif cli == 'codex':
    for ts, path in files(os.path.join(home, '.codex/sessions'), 4, 'rollout-', '.jsonl'):
        sid, model, first = None, None, None
        for v in lines(path):
            p = v.get('payload') if isinstance(v.get('payload'), dict) else {}
            if v.get('type') == 'session_meta' and sid is None: sid = p.get('id')
            if v.get('type') == 'turn_context' and model is None and isinstance(p.get('model'), str): model = p['model']
            if first is None and v.get('type') == 'response_item' and p.get('type') == 'message' and p.get('role') == 'user': first = label(text(p.get('content')))
            if first is None and v.get('type') == 'event_msg' and p.get('type') == 'user_message': first = label(p.get('message'))
            if first is None and v.get('type') == 'message' and v.get('role') == 'user': first = label(text(v.get('content')))
        name = os.path.basename(path)[:-6]
        emit(sid if isinstance(sid, str) else name[-36:], model, ts, first)
else:
    db = os.path.join(home, '.local/share/opencode/opencode.db')
    done = False
    try:
        if stat.S_ISREG(os.lstat(db).st_mode):
            import sqlite3, urllib.parse
            con = sqlite3.connect('file:' + urllib.parse.quote(db) + '?mode=ro', uri=True, timeout=2)
            for sid, title, model, updated in con.execute('select id, title, model, time_updated from session where parent_id is null order by time_updated desc limit ?', (MAX,)):
                try:
                    mv = json.loads(model) if isinstance(model, str) else None
                except ValueError:
                    mv = None
                emit(sid, mv.get('id') or mv.get('modelID') if isinstance(mv, dict) else None, (updated or 0) / 1000, title)
            done = True
    except Exception:
        pass
    if not done:
        for ts, path in files(os.path.join(home, '.local/share/opencode/storage/session'), 2, '', '.json'):
            try:
                v = json.loads(head(path).decode('utf-8', 'replace'))
            except ValueError:
                continue
            if isinstance(v, dict):
                m = v.get('model') if isinstance(v.get('model'), dict) else {}
                emit(v.get('id'), m.get('modelID'), ts, v.get('title'))
`

export function sessionsArgv (cli: SubagentCli, headBytes = 262144): string[] {
  return ['/usr/bin/python3', '-I', '-c', LISTER, cli, String(MAX_SESSIONS), String(headBytes)]
}

/** Parses the helper's JSON lines into sessions, newest first; entries without a valid id are dropped. */
export function parseSessions (output: string): CliSession[] {
  const out: CliSession[] = []
  const seen = new Set<string>()
  for (const line of output.split('\n')) {
    if (out.length >= MAX_SESSIONS * 2) break
    if (!line.startsWith('{') || line.length > 8192) continue
    let v: unknown
    try { v = JSON.parse(line) } catch { continue }
    if (!isObject(v)) continue
    const id = sessionId(v.id)
    if (id === undefined || seen.has(id)) continue
    seen.add(id)
    const ts = typeof v.ts === 'number' && Number.isFinite(v.ts) && v.ts > 0 ? Math.floor(v.ts) : 0
    const model = typeof v.model === 'string' && v.model.trim() !== '' ? oneLine(v.model, 100) : null
    out.push({ session_id: id, model, timestamp: ts, label: typeof v.label === 'string' ? oneLine(v.label, MAX_LABEL) : '' })
  }
  return out.sort((a, b) => b.timestamp - a.timestamp).slice(0, MAX_SESSIONS)
}
