// progress notifications of a run (docs/contract.md#sub-agent-execution) on an injected clock.
import t from 'tap'
import { formatElapsed, startRunProgress } from '../../../plugins/sub-agent/progress.js'

interface Sent { progress: number, total: number | undefined, message: string }

function harness (intervalS = 15, wantsProgress = true) {
  let now = 1_000_000
  const sent: Sent[] = []
  const ctx = { wantsProgress, progress: async (progress: number, total: number | undefined, message: string) => { sent.push({ progress, total, message }) } }
  const p = startRunProgress(ctx, { intervalS, totalS: 3600, now: () => now, tickMs: 2 })
  const advance = async (ms: number): Promise<void> => { now += ms; await new Promise(resolve => setTimeout(resolve, 20)) }
  return { p, sent, advance }
}

t.test('elapsed is written as s, m ss, h mm', async t => {
  t.equal(formatElapsed(0), '0s')
  t.equal(formatElapsed(59.9), '59s')
  t.equal(formatElapsed(65), '1m 05s')
  t.equal(formatElapsed(3599), '59m 59s')
  t.equal(formatElapsed(3720), '1h 02m')
})

t.test('first after 1 s, then every interval; progress = elapsed seconds, total = timeout', async t => {
  const { p, sent, advance } = harness(15)
  t.teardown(p.stop)
  await advance(500)
  t.equal(sent.length, 0, 'nothing before one second')
  await advance(600)
  t.same(sent, [{ progress: 1, total: 3600, message: 'Agent running... (1s)' }])
  await advance(10_000)
  t.equal(sent.length, 1, 'no repeat inside the interval')
  await advance(5_000)
  t.same(sent.at(-1), { progress: 16, total: 3600, message: 'Agent running... (16s)' })
})

t.test('a new action is reported at the next whole second, at most one per second, never a repeated progress value', async t => {
  const { p, sent, advance } = harness(15)
  t.teardown(p.stop)
  await advance(1100)
  p.action('Bash: npm test')
  p.action('Read: package.json')
  await advance(100)
  t.equal(sent.length, 1, 'the same second as the last notification: held back')
  await advance(900)
  t.same(sent.at(-1), { progress: 2, total: 3600, message: 'Read: package.json (2s)' })
  p.action('Read: package.json')
  await advance(1000)
  t.equal(sent.length, 2, 'the same action again is not news')
  p.action('Write: src/a.ts')
  await advance(1000)
  t.equal(sent.at(-1)?.message, 'Write: src/a.ts (4s)')
  await advance(15_000)
  t.equal(sent.at(-1)?.message, 'Write: src/a.ts (19s)', 'periodic notifications repeat the latest action')
  const values = sent.map(s => s.progress)
  t.same(values, [...new Set(values)].sort((a, b) => a - b), 'strictly increasing')
  t.equal(p.last(), 'Write: src/a.ts')
})

t.test('stop() ends notifications for good; without a progress token nothing is sent', async t => {
  const a = harness(15)
  await a.advance(1100)
  a.p.stop()
  a.p.action('late')
  await a.advance(20_000)
  t.equal(a.sent.length, 1)
  const b = harness(15, false)
  b.p.action('x')
  await b.advance(20_000)
  t.equal(b.sent.length, 0)
  b.p.stop()
})
