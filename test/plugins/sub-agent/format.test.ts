// the result format of docs/contract.md#sub-agent-result.
import t from 'tap'
import { formatCost, formatDuration, formatResult, terminationReason, type FormatInput } from '../../../plugins/sub-agent/format.js'
import { capHeadTail } from '../../../plugins/sub-agent/text.js'

const input = (over: Partial<FormatInput> = {}): FormatInput => ({
  displayModel: 'sonnet',
  maxTurns: 25,
  durationMs: 12_345,
  timeoutS: 3600,
  maxChars: 30_000,
  outcome: { text: 'Done: 3 files changed.', costUsd: 0.0042, turns: 7, sessionId: 'abc-123', isError: false },
  ending: { exitCode: 0, timedOut: false },
  ...over
})

t.test('Completed (success): header, fields, text, session line', async t => {
  const r = formatResult(input())
  t.equal(r.isError, false)
  t.equal(r.text, [
    '**Sub-Agent Completed** (success)',
    '**Model:** sonnet | **Turns:** 7/25 | **Cost:** $0.0042 | **Duration:** 12.3s',
    '',
    'Done: 3 files changed.',
    '',
    '**Session ID:** `abc-123` (hint: pass it as resume_session_id to continue)'
  ].join('\n'))
})

t.test('unknown turns show ?/max, unknown or zero cost shows unavailable, no session line without an id', async t => {
  const r = formatResult(input({ outcome: { text: 'ok', isError: false } }))
  t.match(r.text, '**Turns:** ?/25 | **Cost:** unavailable |')
  t.notMatch(r.text, 'Session ID')
})

t.test('cost is never $0.00 or $0.0000', async t => {
  t.equal(formatCost(0), 'unavailable')
  t.equal(formatCost(undefined), 'unavailable')
  t.equal(formatCost(Number.NaN), 'unavailable')
  t.equal(formatCost(0.00001), '<$0.0001')
  t.equal(formatCost(0.00005), '$0.0001')
  t.equal(formatCost(1.23456), '$1.2346')
  for (const c of [0, 1e-9, 4e-5, 0.00004999]) t.notMatch(formatCost(c), /^\$0\.0+$/)
})

t.test('duration has one decimal', async t => {
  t.equal(formatDuration(0), '0.0s')
  t.equal(formatDuration(61_049), '61.0s')
  t.equal(formatDuration(999), '1.0s')
})

t.test('Completed (error): the CLI reported an error or exited non-zero with text', async t => {
  const a = formatResult(input({ outcome: { text: 'API error 401', isError: true } }))
  t.equal(a.isError, true)
  t.match(a.text, /^\*\*Sub-Agent Completed\*\* \(error\)\n/)
  const b = formatResult(input({ ending: { exitCode: 2, timedOut: false } }))
  t.match(b.text, /^\*\*Sub-Agent Completed\*\* \(error\)\n/)
})

t.test('the terminated reasons of the table', async t => {
  const none = { isError: false }
  t.equal(terminationReason({ exitCode: null, timedOut: true }, none, 3600), 'timed out after 3600s')
  t.equal(terminationReason({ exitCode: 124, timedOut: false }, none, 60), 'timed out after 60s')
  t.equal(terminationReason({ exitCode: 137, timedOut: false }, none, 60), 'killed by SIGKILL')
  t.equal(terminationReason({ exitCode: -9, timedOut: false }, none, 60), 'killed by SIGKILL')
  t.equal(terminationReason({ exitCode: 143, timedOut: false }, none, 60), 'terminated by SIGTERM')
  t.equal(terminationReason({ exitCode: -15, timedOut: false }, none, 60), 'terminated by SIGTERM')
  t.equal(terminationReason({ exitCode: 0, timedOut: false }, none, 60), 'crashed before producing results')
  t.equal(terminationReason({ exitCode: 3, timedOut: false }, none, 60), 'failed with exit code 3')
  t.match(terminationReason({ exitCode: null, timedOut: false }, none, 60), /without an exit status/)
  t.equal(terminationReason({ exitCode: 3, timedOut: false }, { isError: true, text: 'x' }, 60), undefined, 'text makes it Completed (error)')
  t.equal(terminationReason({ exitCode: 143, timedOut: false }, { isError: false, text: 'partial' }, 60), 'terminated by SIGTERM', 'a kill is Terminated even with text')
})

t.test('Terminated form: reason, model and duration, the sentence, last action, error output, session line', async t => {
  const r = formatResult(input({
    outcome: { isError: false, sessionId: 's-9', errorText: 'Reconnecting... 5/5' },
    ending: { exitCode: null, timedOut: true },
    durationMs: 3_610_000,
    lastAction: 'Bash: npm test',
    errorOutput: 'npm ERR! something\n'
  }))
  t.equal(r.isError, true)
  const lines = r.text.split('\n')
  t.equal(lines[0], '**Sub-Agent Terminated** (timed out after 3600s)')
  t.equal(lines[1], '**Model:** sonnet | **Duration:** 3610.0s')
  t.match(lines[3], /^The agent process ended before producing results/)
  t.equal(lines[4], 'Last action: Bash: npm test')
  t.match(r.text, /Error output \(end\):\n```\nReconnecting\.\.\. 5\/5\nnpm ERR! something\n```/)
  t.match(r.text, /\n\n\*\*Session ID:\*\* `s-9` \(hint: pass it as resume_session_id to continue\)$/)
  t.notMatch(r.text, /Turns|Cost/)
})

t.test('the agent text is capped head + tail; secrets and control characters never come through', async t => {
  const text = 'H'.repeat(20_000) + 'MIDDLE' + 'T'.repeat(20_000)
  const r = formatResult(input({ outcome: { text: `${text}\u001b[31m`, isError: false }, secrets: ['sk-secret-value-1'] }))
  t.ok(r.text.includes('H'.repeat(15_000)), 'head kept')
  t.ok(r.text.includes('T'.repeat(14_000)), 'tail kept')
  t.notOk(r.text.includes('MIDDLE'), 'middle left out')
  t.ok(r.text.includes("[... 10010 characters of the agent's answer omitted ...]"), 'the note says how much')
  t.notOk(r.text.includes('\u001b'), 'no escape characters')
  const s = formatResult(input({ outcome: { text: 'token is sk-secret-value-1 ok', isError: false }, secrets: ['sk-secret-value-1'] }))
  t.match(s.text, 'token is [redacted] ok')
  const e = formatResult(input({ outcome: { isError: false }, ending: { exitCode: 1, timedOut: false }, errorOutput: 'Invalid key sk-secret-value-1', secrets: ['sk-secret-value-1'] }))
  t.notMatch(e.text, 'sk-secret-value-1')
})

t.test('capHeadTail never splits a surrogate pair and leaves short text alone', async t => {
  t.equal(capHeadTail('short', 10), 'short')
  const capped = capHeadTail('😀'.repeat(3000), 1000)
  t.ok(Array.from(capped).every(ch => ch.length === 2 || /[\s[\].a-z0-9']/.test(ch)), 'only whole emoji and the note')
  t.match(capped, /2000 characters/)
})
