import { execFileSync, spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import t, { type Test } from 'tap'
import { MAX_SESSIONS, parseSessions, sessionsArgv } from '../../../plugins/sub-agent/sessions.js'

/*
 * The session lister runs in the sandbox with the image's python3. Here it runs with the host's
 * python3 against a fake home, so the stores of the three CLIs and hostile files are checked without
 * Docker (test/integration/terminal-ws.test.ts runs it in the real image).
 */
const python = spawnSync('python3', ['--version']).status === 0

function withHome (t: Test, files: Record<string, string | { link: string }>, mtimes: Record<string, number> = {}): string {
  const home = mkdtempSync(join(tmpdir(), 'cubicle-sessions-'))
  t.teardown(() => rmSync(home, { recursive: true, force: true }))
  for (const [path, content] of Object.entries(files)) {
    const full = join(home, path)
    mkdirSync(dirname(full), { recursive: true })
    if (typeof content === 'string') writeFileSync(full, content)
    else symlinkSync(content.link, full)
  }
  for (const [path, seconds] of Object.entries(mtimes)) utimesSync(join(home, path), seconds, seconds)
  return home
}

/** Runs the lister as the sandbox would (argv as given, python3 from PATH) and parses its output like the service. */
function list (cli: 'claude' | 'codex' | 'opencode', home: string): ReturnType<typeof parseSessions> {
  const [, ...args] = sessionsArgv(cli)
  return parseSessions(execFileSync('python3', args, { env: { HOME: home, PATH: process.env.PATH }, encoding: 'utf8', timeout: 10_000 }))
}

const lines = (...values: unknown[]): string => values.map(v => JSON.stringify(v)).join('\n') + '\n'

t.test('the lister runs python3 in isolated mode with the CLI, the cap and the head size as arguments', async t => {
  const argv = sessionsArgv('codex', 1000)
  t.equal(argv[0], '/usr/bin/python3')
  t.equal(argv[1], '-I', 'no user site, no PYTHON* variables from the sandbox')
  t.same(argv.slice(4), ['codex', String(MAX_SESSIONS), '1000'])
})

t.test('claude: id from the file name, model, first real user message or the summary as label', { skip: !python && 'python3 is not installed on this host' }, async t => {
  const dir = '.claude/projects/-home-assistant'
  const home = withHome(t, {
    [`${dir}/0b1c-id.jsonl`]: lines(
      { type: 'user', message: { role: 'user', content: '<command-name>/init</command-name>' } },
      { type: 'user', message: { role: 'user', content: [{ type: 'text', text: 'Fix   the\nbuild please' }] } },
      { type: 'assistant', message: { model: 'claude-sonnet-4-6', content: [] } }),
    [`${dir}/a2.jsonl`]: lines({ type: 'summary', summary: 'Refactor parser' }, { type: 'user', message: { content: 'x' } }),
    [`${dir}/link.jsonl`]: { link: '/dev/zero' }
  }, { [`${dir}/0b1c-id.jsonl`]: 1700000000, [`${dir}/a2.jsonl`]: 1700000100 })
  t.same(list('claude', home), [
    { session_id: 'a2', model: null, timestamp: 1700000100, label: 'Refactor parser' },
    { session_id: '0b1c-id', model: 'claude-sonnet-4-6', timestamp: 1700000000, label: 'Fix the build please' }
  ], 'the symlink is not followed')
})

t.test('codex: both rollout formats, environment wrappers skipped', { skip: !python && 'python3 is not installed on this host' }, async t => {
  const id = '0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b'
  const old = '11111111-2222-3333-4444-555555555555'
  const newFile = `.codex/sessions/2025/10/01/rollout-2025-10-01T10-00-00-${id}.jsonl`
  const oldFile = `.codex/sessions/2025/01/01/rollout-2025-01-01T00-00-00-${old}.jsonl`
  const home = withHome(t, {
    [newFile]: lines(
      { type: 'session_meta', payload: { id, cwd: '/home/assistant' } },
      { type: 'response_item', payload: { type: 'message', role: 'user', content: [{ type: 'input_text', text: '<environment_context>…</environment_context>' }] } },
      { type: 'turn_context', payload: { model: 'gpt-5-codex' } },
      { type: 'event_msg', payload: { type: 'user_message', message: 'write tests' } }),
    [oldFile]: lines(
      { id: old, timestamp: '2025-01-01', instructions: null },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'old format task' }] })
  }, { [newFile]: 1759300000, [oldFile]: 1735689600 })
  t.same(list('codex', home), [
    { session_id: id, model: 'gpt-5-codex', timestamp: 1759300000, label: 'write tests' },
    { session_id: old, model: null, timestamp: 1735689600, label: 'old format task' }
  ])
})

t.test('opencode: the JSON store of older releases (the SQLite store is covered on real Docker)', { skip: !python && 'python3 is not installed on this host' }, async t => {
  const dir = '.local/share/opencode/storage/session/project'
  const home = withHome(t, {
    [`${dir}/ses_abc.json`]: JSON.stringify({ id: 'ses_abc', title: 'Add login page', model: { modelID: 'gpt-5' } }),
    [`${dir}/broken.json`]: '{"id": "ses_'
  }, { [`${dir}/ses_abc.json`]: 1700000000 })
  t.same(list('opencode', home), [{ session_id: 'ses_abc', model: 'gpt-5', timestamp: 1700000000, label: 'Add login page' }])
})

t.test('at most 20 sessions, newest first, from a store with more', { skip: !python && 'python3 is not installed on this host' }, async t => {
  const files: Record<string, string> = {}
  const mtimes: Record<string, number> = {}
  for (let i = 0; i < 25; i++) {
    files[`.claude/projects/p/s${i}.jsonl`] = lines({ type: 'user', message: { content: `task ${i}` } })
    mtimes[`.claude/projects/p/s${i}.jsonl`] = 1700000000 + i
  }
  const sessions = list('claude', withHome(t, files, mtimes))
  t.equal(sessions.length, 20)
  t.same(sessions.slice(0, 2).map(s => [s.session_id, s.label, s.timestamp]), [['s24', 'task 24', 1700000024], ['s23', 'task 23', 1700000023]])
})

t.test('hostile helper output: bad ids dropped, labels cleaned and cut to 80, oversized lines skipped', async t => {
  const long = 'é'.repeat(300)
  const out = [
    JSON.stringify({ id: '../../etc', model: 'm', ts: 5, label: 'x' }),
    JSON.stringify({ id: 'ok', model: '  ', ts: 4, label: `${long}\u0007\u001b[31m` }),
    JSON.stringify({ id: '$(reboot)', ts: 3 }),
    JSON.stringify({ id: 'huge', ts: 2, label: 'y'.repeat(9000) }),
    JSON.stringify({ id: 'ok', ts: 9, label: 'a duplicate' }),
    JSON.stringify({ id: 'nots', ts: 'yesterday', model: 7, label: ['x'] }),
    '{"id": "cut-off',
    'not json at all'
  ].join('\n')
  const sessions = parseSessions(out)
  t.same(sessions.map(s => s.session_id), ['ok', 'nots'])
  t.ok((sessions[0]?.label.length ?? 99) <= 80)
  t.match(sessions[0]?.label, /…$/)
  t.notMatch(sessions[0]?.label, /[\u0000-\u001f]/) // eslint-disable-line no-control-regex
  t.equal(sessions[0]?.model, null, 'a blank model is null')
  t.same(sessions[1], { session_id: 'nots', model: null, timestamp: 0, label: '' }, 'wrongly typed fields are dropped')
  const many = Array.from({ length: 30 }, (_, i) => JSON.stringify({ id: `s${i}`, ts: i + 1 })).join('\n')
  t.equal(parseSessions(many).length, MAX_SESSIONS)
})
