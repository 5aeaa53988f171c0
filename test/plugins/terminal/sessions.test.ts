import t from 'tap'
import { HEAD_BYTES, parseSessions, sessionsArgv, splitFiles, type SessionFile } from '../../../plugins/terminal/sessions.js'

const file = (name: string, mtime: number, lines: unknown[] | string): SessionFile =>
  ({ name, mtime, head: Buffer.from(typeof lines === 'string' ? lines : lines.map(l => JSON.stringify(l)).join('\n')) })

t.test('claude: id, model, first real user message (or summary) as label', async t => {
  const sessions = parseSessions('claude', [
    file('0b1c-id.jsonl', 1700000000, [
      { type: 'user', sessionId: '0b1c-id', message: { role: 'user', content: '<command-name>/init</command-name>' } },
      { type: 'user', sessionId: '0b1c-id', message: { role: 'user', content: [{ type: 'text', text: 'Fix   the\nbuild please' }] } },
      { type: 'assistant', message: { model: 'claude-sonnet-4-6', content: [] } }
    ]),
    file('a2.jsonl', 1700000100, [{ type: 'summary', summary: 'Refactor parser' }, { type: 'user', message: { content: 'x' } }])
  ])
  t.same(sessions, [
    { session_id: 'a2', model: null, timestamp: 1700000100, label: 'Refactor parser' },
    { session_id: '0b1c-id', model: 'claude-sonnet-4-6', timestamp: 1700000000, label: 'Fix the build please' }
  ])
})

t.test('codex: both rollout formats, environment wrappers skipped', async t => {
  const sessions = parseSessions('codex', [
    file('rollout-2025-10-01T10-00-00-0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.jsonl', 1759300000, [
      { type: 'session_meta', payload: { id: '0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b', cwd: '/home/assistant' } },
      { type: 'response_item', payload: { type: 'message', role: 'user', content: [{ type: 'input_text', text: '<environment_context>…</environment_context>' }] } },
      { type: 'turn_context', payload: { model: 'gpt-5-codex' } },
      { type: 'event_msg', payload: { type: 'user_message', message: 'write tests' } }
    ]),
    file('rollout-2025-01-01T00-00-00-11111111-2222-3333-4444-555555555555.jsonl', 1735689600, [
      { id: '11111111-2222-3333-4444-555555555555', timestamp: '2025-01-01', instructions: null },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'old format task' }] }
    ])
  ])
  t.same(sessions, [
    { session_id: '0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b', model: 'gpt-5-codex', timestamp: 1759300000, label: 'write tests' },
    { session_id: '11111111-2222-3333-4444-555555555555', model: null, timestamp: 1735689600, label: 'old format task' }
  ])
})

t.test('opencode: one JSON object per session', async t => {
  const sessions = parseSessions('opencode', [
    file('ses_abc.json', 1700000000, JSON.stringify({ id: 'ses_abc', title: 'Add login page', time: { created: 1, updated: 2 } })),
    file('broken.json', 1700000001, '{"id": "ses_')
  ])
  t.same(sessions, [{ session_id: 'ses_abc', model: null, timestamp: 1700000000, label: 'Add login page' }])
})

t.test('hostile session files: bad ids dropped, labels cleaned and cut to 80, truncated lines skipped', async t => {
  const long = 'é'.repeat(300)
  const sessions = parseSessions('claude', [
    file('../../etc.jsonl', 5, [{ type: 'user', sessionId: '../../etc', message: { content: 'x' } }]),
    file('ok.jsonl', 4, `{"type":"user","message":{"content":"${long}\\u0007\\u001b[31m"}}\n{"type":"assistant","message":{"model":"m`),
    file('$(reboot).jsonl', 3, [])
  ])
  t.equal(sessions.length, 1)
  t.equal(sessions[0]?.session_id, 'ok')
  t.ok((sessions[0]?.label.length ?? 99) <= 80)
  t.match(sessions[0]?.label, /…$/)
  t.notMatch(sessions[0]?.label, /[\u0000-\u001f]/) // eslint-disable-line no-control-regex
  t.equal(sessions[0]?.model, null, 'a cut-off line is skipped')
})

t.test('at most 20 sessions, newest first, from the listing script output', async t => {
  const { argv, nonce } = sessionsArgv('claude')
  t.match(argv[2], /find "\$root" -maxdepth "\$depth" -type f/)
  t.same(argv.slice(4, 6), ['.claude/projects', '2'])
  t.equal(argv.at(-1), String(HEAD_BYTES))
  const parts: string[] = []
  for (let i = 0; i < 25; i++) parts.push(`\n${nonce} ${1700000000 + i}.5 s${i}.jsonl\n{"type":"user","message":{"content":"task ${i}"}}\n`)
  const files = splitFiles(Buffer.from(parts.join('')), nonce)
  t.equal(files.length, 20, 'the listing is capped')
  const sessions = parseSessions('claude', files)
  t.equal(sessions[0]?.session_id, 's19')
  t.equal(sessions[0]?.label, 'task 19')
  t.equal(sessions[0]?.timestamp, 1700000019)
  t.same(splitFiles(Buffer.from('no markers here'), nonce), [])
})
