// result parsing of claude JSON, codex JSONL and opencode JSONL (docs/contract.md#sub-agent-result), from real CLI output.
import { readFileSync } from 'node:fs'
import t from 'tap'
import { EventStream, MAX_LINE_CHARS, parseOutput } from '../../../plugins/sub-agent/events.js'

const fixture = (name: string): string => readFileSync(new URL(`../../fixtures/sub-agent/${name}`, import.meta.url), 'utf8')

t.test('claude stream-json: text, cost, turns, session from the result object; actions from tool_use', async t => {
  const { outcome, actions } = parseOutput('claude', fixture('claude-stream.jsonl'))
  t.equal(outcome.text, 'Fixture done: wrote fx/hello.txt')
  t.equal(outcome.costUsd, 0.0012000000000000001)
  t.equal(outcome.turns, 2)
  t.match(outcome.sessionId, /^[0-9a-f-]{36}$/)
  t.equal(outcome.isError, false)
  t.equal(actions[0], 'Starting (claude-sonnet-4-6)')
  t.match(actions[1], /^Bash: mkdir -p "\$\(dirname 'fx\/hello\.txt'\)"/)
  t.equal(actions.at(-1), 'Says: Fixture done: wrote fx/hello.txt')
})

t.test('claude --output-format json (one object) parses the same way', async t => {
  const { outcome } = parseOutput('claude', fixture('claude-json.json'))
  t.match(outcome, { text: 'Fixture done: wrote fx/hello.txt', turns: 2, isError: false })
  t.ok((outcome.costUsd ?? 0) > 0)
})

t.test('claude error_max_turns: an error without text, with the reason', async t => {
  const { outcome } = parseOutput('claude', fixture('claude-max-turns.jsonl'))
  t.equal(outcome.isError, true)
  t.equal(outcome.text, undefined)
  t.match(outcome.errorText, /turn limit/)
  t.equal(outcome.turns, 2)
})

t.test('claude: 0 cost, 0 turns and an empty session count as unknown; the last result object wins', async t => {
  const lines = [
    '{"type":"result","subtype":"success","is_error":false,"result":"first","total_cost_usd":0.5,"num_turns":3,"session_id":"s-1"}',
    '{"type":"result","subtype":"success","is_error":false,"result":"second","total_cost_usd":0,"num_turns":0,"session_id":""}'
  ].join('\n')
  const { outcome } = parseOutput('claude', lines)
  t.equal(outcome.text, 'second')
  t.equal(outcome.costUsd, undefined)
  t.equal(outcome.turns, undefined)
  t.equal(outcome.sessionId, 's-1', 'the id seen earlier in the stream stays known')
})

t.test('claude killed before its result: no text (assistant text on the way is not an answer)', async t => {
  const stream = fixture('claude-stream.jsonl').split('\n').filter(l => !l.includes('"type":"result"')).join('\n')
  const { outcome } = parseOutput('claude', stream)
  t.equal(outcome.text, undefined)
  t.match(outcome.sessionId, /^[0-9a-f-]{36}$/)
})

t.test('codex JSONL: text of the last agent_message, thread id as session, no cost or turns', async t => {
  const { outcome, actions } = parseOutput('codex', fixture('codex.jsonl'))
  t.equal(outcome.text, 'Fixture done: wrote fx/hello.txt')
  t.match(outcome.sessionId, /^[0-9a-f]{8}-/)
  t.equal(outcome.costUsd, undefined)
  t.equal(outcome.turns, undefined)
  t.equal(outcome.isError, false)
  t.equal(actions[0], 'Starting')
  t.ok(actions.some(a => /^Running: mkdir -p "\$\(dirname 'fx\/hello\.txt'\)"/.test(a)), actions.join(' | '))
})

t.test('codex failing to reach its model: no text, the last error message, the thread id', async t => {
  const { outcome } = parseOutput('codex', fixture('codex-fail.jsonl'))
  t.equal(outcome.text, undefined)
  t.match(outcome.errorText, /Reconnecting/)
  t.match(outcome.sessionId, /^[0-9a-f]{8}-/)
})

t.test('codex turn.failed marks the run as an error', async t => {
  const { outcome } = parseOutput('codex', '{"type":"thread.started","thread_id":"t-1"}\n{"type":"turn.failed","error":{"message":"quota exceeded"}}\n')
  t.match(outcome, { isError: true, errorText: 'quota exceeded', sessionId: 't-1' })
})

t.test('opencode JSONL: text of the last message, cost summed over steps, steps as turns', async t => {
  const { outcome, actions } = parseOutput('opencode', fixture('opencode.jsonl'))
  t.equal(outcome.text, 'Fixture done: wrote fx/hello.txt')
  t.equal(Number(outcome.costUsd?.toFixed(5)), 0.00028)
  t.equal(outcome.turns, 2)
  t.match(outcome.sessionId, /^ses_/)
  t.ok(actions.some(a => a.startsWith('bash: mkdir -p')), actions.join(' | '))
})

t.test('opencode: text parts of one message join; a later message replaces the text; usage.total_cost as fallback; error events', async t => {
  const lines = [
    '{"type":"text","sessionID":"ses_a","part":{"messageID":"m1","text":"Hello "}}',
    '{"type":"text","sessionID":"ses_a","part":{"messageID":"m1","text":"world"}}',
    '{"type":"step_finish","sessionID":"ses_a","part":{"cost":0}}',
    '{"type":"text","sessionID":"ses_a","part":{"messageID":"m2","text":"Final"}}',
    '{"type":"summary","usage":{"total_cost":0.25}}',
    '{"type":"error","sessionID":"ses_a","error":{"name":"APIError","data":{"message":"rate limited"}}}'
  ].join('\n')
  const { outcome } = parseOutput('opencode', lines)
  t.match(outcome, { text: 'Final', costUsd: 0.25, turns: 1, isError: true, errorText: 'rate limited', sessionId: 'ses_a' })
})

t.test('malformed lines are skipped everywhere; plain text is kept as a bounded tail', async t => {
  for (const cli of ['claude', 'codex', 'opencode'] as const) {
    const junk = ['not json', '{"unterminated": ', '[1,2,3]', '{"type":"result","result":42}', '{"type":"item.completed","item":"x"}',
      '{"type":"tool_use","part":null}', '\u0000\u001b[31m{}', '{"sessionID":{"x":1}}', '{"session_id":"bad id with spaces"}'].join('\n')
    const { outcome, raw } = parseOutput(cli, junk)
    t.equal(outcome.text, undefined, cli)
    t.equal(outcome.sessionId, undefined, cli)
    t.match(raw, /not json/)
  }
})

t.test('lines are split across chunks at any point, and a line over the cap is dropped whole', async t => {
  const text = fixture('claude-stream.jsonl')
  const actions: string[] = []
  const stream = new EventStream('claude', a => actions.push(a))
  for (let i = 0; i < text.length; i += 7) stream.push(text.slice(i, i + 7))
  stream.end()
  t.equal(stream.reader.outcome().text, 'Fixture done: wrote fx/hello.txt')
  const huge = new EventStream('claude', () => {})
  huge.push('{"type":"result","result":"' + 'a'.repeat(MAX_LINE_CHARS) + '"}\n')
  huge.push('{"type":"result","result":"small","num_turns":1}\n')
  t.equal(huge.reader.outcome().text, 'small')
})
