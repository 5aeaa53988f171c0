import { randomBytes } from 'node:crypto'
import type { Cli } from './processes.js'
import type { CliSession } from './types.js'
import { clip } from './text.js'

/*
 * Sessions of the active sub-agent CLI (surface.md §7.2), read from the CLI's own store in the
 * sandbox user's home. One exec lists the newest session files and prints the head of each; the
 * server parses them. Everything read is untrusted: bounded per file and in total, malformed lines
 * are skipped, ids must match a strict pattern, labels are cleaned and cut to 80 characters.
 *
 *   claude    ~/.claude/projects/<project>/<session id>.jsonl          (JSON lines: user/assistant/summary)
 *   codex     ~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl  (JSON lines: session_meta, turn_context, messages)
 *   opencode  ~/.local/share/opencode/storage/session/<project>/<id>.json (one JSON object: id, title, time)
 */

export const MAX_SESSIONS = 20
/** Bytes read from the start of each session file: the first user message and the model are near the top. */
export const HEAD_BYTES = 65536
const MAX_LABEL = 80
const SESSION_ID = /^[A-Za-z0-9_.:-]{1,128}$/
const UUID = /([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$/

interface Store { root: string, depth: number, pattern: string }

const STORES: Record<Cli, Store> = {
  claude: { root: '.claude/projects', depth: 2, pattern: '*.jsonl' },
  codex: { root: '.codex/sessions', depth: 4, pattern: 'rollout-*.jsonl' },
  opencode: { root: '.local/share/opencode/storage/session', depth: 2, pattern: '*.json' }
}

/**
 * Newest files first (symlinks are not followed: find -P, -type f), each preceded by a line
 * `<nonce> <mtime> <name>`; the nonce is random per call so file content cannot pose as a header
 * by accident.
 */
const LIST_SCRIPT = `
root=$HOME/$1; depth=$2; pattern=$3; nonce=$4; max=$5; bytes=$6
[ -d "$root" ] || exit 0
find "$root" -maxdepth "$depth" -type f -name "$pattern" -printf '%T@ %p\\n' 2>/dev/null | sort -rn | head -n "$max" |
while IFS= read -r line; do
  f=\${line#* }
  printf '\\n%s %s %s\\n' "$nonce" "\${line%% *}" "\${f##*/}"
  head -c "$bytes" -- "$f" 2>/dev/null
done
`

export function sessionsArgv (cli: Cli): { argv: string[], nonce: string } {
  const store = STORES[cli]
  const nonce = `cubicle-${randomBytes(12).toString('hex')}`
  return { argv: ['/bin/sh', '-c', LIST_SCRIPT, 'cubicle-sessions', store.root, String(store.depth), store.pattern, nonce, String(MAX_SESSIONS), String(HEAD_BYTES)], nonce }
}

export interface SessionFile { name: string, mtime: number, head: Buffer }

/** Splits the script's output into files. */
export function splitFiles (output: Buffer, nonce: string): SessionFile[] {
  const marker = Buffer.from(`\n${nonce} `, 'latin1')
  const files: SessionFile[] = []
  let at = output.indexOf(marker)
  while (at !== -1 && files.length < MAX_SESSIONS) {
    const lineEnd = output.indexOf(0x0a, at + marker.length)
    if (lineEnd === -1) break
    const next = output.indexOf(marker, lineEnd)
    const m = /^([0-9]{1,12})(?:\.[0-9]+)? (.{1,255})$/.exec(output.subarray(at + marker.length, lineEnd).toString('utf8'))
    if (m !== null) files.push({ mtime: Number(m[1]), name: m[2] as string, head: output.subarray(lineEnd + 1, next === -1 ? output.length : next) })
    at = next
  }
  return files
}

type Json = Record<string, unknown>
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)
const str = (v: unknown): string | undefined => typeof v === 'string' && v !== '' ? v : undefined

/** JSON lines of a file head; the last line may be cut short and is then skipped like any malformed line. */
function jsonLines (head: Buffer): Json[] {
  const out: Json[] = []
  for (const line of head.toString('utf8').split('\n')) {
    if (line.length < 2 || line[0] !== '{') continue
    try {
      const v: unknown = JSON.parse(line)
      if (isObject(v)) out.push(v)
    } catch {}
  }
  return out
}

/** Text of a message `content`: a string, or the text parts of an array. */
function contentText (content: unknown): string | undefined {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return undefined
  for (const part of content) {
    if (isObject(part) && (part.type === 'text' || part.type === 'input_text') && typeof part.text === 'string') return part.text
  }
  return undefined
}

/** Wrapper texts the CLIs put in the user role (environment context, command echoes) are not labels. */
const isLabelText = (text: string | undefined): text is string =>
  text !== undefined && text.trim() !== '' && !/^\s*</.test(text) && !text.startsWith('Caveat:')

function fromClaude (file: SessionFile): Omit<CliSession, 'timestamp'> | null {
  let id = file.name.endsWith('.jsonl') ? file.name.slice(0, -6) : ''
  let model: string | null = null
  let summary: string | undefined
  let first: string | undefined
  for (const line of jsonLines(file.head)) {
    if (line.type === 'summary') summary ??= str(line.summary)
    if (typeof line.sessionId === 'string' && SESSION_ID.test(line.sessionId)) id = line.sessionId
    const message = isObject(line.message) ? line.message : undefined
    if (line.type === 'user' && message !== undefined && first === undefined) {
      const text = contentText(message.content)
      if (isLabelText(text)) first = text
    }
    if (line.type === 'assistant' && model === null && message !== undefined) model = str(message.model) ?? null
  }
  return { session_id: id, model, label: summary ?? first ?? '' }
}

function fromCodex (file: SessionFile): Omit<CliSession, 'timestamp'> | null {
  let id = UUID.exec(file.name)?.[1] ?? ''
  let model: string | null = null
  let first: string | undefined
  for (const line of jsonLines(file.head)) {
    const item = isObject(line.payload) ? line.payload : line
    if (line.type === 'session_meta' || (line.type === undefined && typeof line.instructions !== 'undefined')) id = str(item.id) ?? id
    if (line.type === 'turn_context') model ??= str(item.model) ?? null
    if (first === undefined && item.type === 'user_message' && isLabelText(str(item.message))) first = item.message as string
    if (first === undefined && item.type === 'message' && item.role === 'user') {
      const text = contentText(item.content)
      if (isLabelText(text)) first = text
    }
  }
  return { session_id: id, model, label: first ?? '' }
}

function fromOpencode (file: SessionFile): Omit<CliSession, 'timestamp'> | null {
  let value: unknown
  try { value = JSON.parse(file.head.toString('utf8')) } catch { return null }
  if (!isObject(value)) return null
  const model = isObject(value.model) ? str(value.model.modelID) ?? null : null
  return { session_id: str(value.id) ?? file.name.replace(/\.json$/, ''), model, label: str(value.title) ?? '' }
}

const PARSERS: Record<Cli, (file: SessionFile) => Omit<CliSession, 'timestamp'> | null> = {
  claude: fromClaude,
  codex: fromCodex,
  opencode: fromOpencode
}

/** Sessions in the reply's shape, newest first; files without a valid id are dropped. */
export function parseSessions (cli: Cli, files: SessionFile[]): CliSession[] {
  const out: CliSession[] = []
  for (const file of files) {
    const s = PARSERS[cli](file)
    if (s === null || !SESSION_ID.test(s.session_id)) continue
    out.push({
      session_id: s.session_id,
      model: s.model === null ? null : clip(s.model, 100),
      timestamp: file.mtime,
      label: clip(s.label, MAX_LABEL)
    })
  }
  return out.sort((a, b) => b.timestamp - a.timestamp).slice(0, MAX_SESSIONS)
}
