/*
 * A fork bomb against a real engine (docs/contract.md#isolation): the pids limit contains it, the
 * server stays responsive and the sandbox recovers. It keeps the sandbox's CPU busy, so it runs alone
 * (test/integration/sandbox-isolation.test.ts has the rest of the isolation and limits).
 */
import t from 'tap'
import { buildSandboxApp, cleanupPrefix, dockerOrSkip } from '../integration/docker.js'
import { pollUntil } from '../fixtures/poll.js'

const PREFIX = 'tbomb'
const { skip } = await dockerOrSkip()

t.test('a fork bomb is contained by the pids limit; the server and the sandbox recover', { skip }, async t => {
  await cleanupPrefix(t, PREFIX)
  const { app } = await buildSandboxApp(t, PREFIX, { pidsLimit: 64, killGraceMs: 2000 })
  const chat = 'iso-bomb'
  await app.sandbox.ensure(chat)
  const answers = async (): Promise<string> => {
    // The sandbox still answers, or was killed and comes back on the next ensure.
    const deadline = Date.now() + 30_000
    while (Date.now() < deadline) {
      try {
        await app.sandbox.ensure(chat)
        let text = ''
        const ok = await app.sandbox.runCommand(chat, 'echo alive; pgrep -c -f "bo[m]b" || true', { timeoutMs: 5000, onOutput: s => { text += s } })
        if (ok.exitCode === 0 && text.startsWith('alive')) return text
      } catch {}
      await new Promise(resolve => setTimeout(resolve, 500))
    }
    return ''
  }

  // Foreground bomb: the top-level bash never exits. Its fork failures make the driver ask the
  // engine, which confirms the pids limit is exhausted: the sandbox is restarted and the call ends
  // with a pids-limit notice; if the timeout comes first, the kill path ends it.
  let t0 = performance.now()
  const r = await app.sandbox.runCommand(chat, 'bomb() { bomb | bomb; }; bomb', { timeoutMs: 3000, onOutput: () => {} })
  let ms = performance.now() - t0
  t.comment(`foreground bomb returned ${JSON.stringify(r)} after ${ms.toFixed(0)} ms`)
  t.ok(r.timedOut || (r.notices ?? []).some(n => n.kind === 'pids-limit'), 'ended by the timeout or by a restart that says why')
  t.ok(ms < 3000 + 10_000 + 1000, `result after ${ms.toFixed(0)} ms (T=3 s)`)
  t.equal((await app.inject('/health')).statusCode, 200, 'the server stays responsive')
  await new Promise(resolve => setTimeout(resolve, 2500)) // SIGKILL pass at T+2 (killGraceMs)
  // That pass, a timer, can run late on a busy host: asked again until the bomb is gone, at most 20 s.
  t.match(await pollUntil(answers, s => /^alive\n0\n$/.test(s), 20_000, 500), /^alive\n0\n$/, 'sandbox answers again, no bomb process left')

  // Background bomb: the command returns at once (background jobs survive a normal exit), the
  // pids limit contains the bomb and the sandbox keeps answering; stop() clears it.
  t0 = performance.now()
  const bg = await app.sandbox.runCommand(chat, 'bomb() { bomb | bomb & }; bomb', { timeoutMs: 3000, onOutput: () => {} })
  ms = performance.now() - t0
  t.comment(`background bomb returned ${JSON.stringify(bg)} after ${ms.toFixed(0)} ms`)
  t.ok(ms < 3000 + 10_000 + 1000)
  await new Promise(resolve => setTimeout(resolve, 1000))
  t.equal((await app.inject('/health')).statusCode, 200, 'the server stays responsive')
  t.match(await answers(), /^alive\n/, 'the sandbox still answers under the contained bomb')
  const pids = (await app.sandbox.exec(chat, ['sh', '-c', 'cat /sys/fs/cgroup/pids.current 2>/dev/null || cat /sys/fs/cgroup/pids/pids.current'])).stdout.toString().trim()
  t.ok(pids === '' || Number(pids) <= 64, `pids.current ${pids} ≤ 64`)
  await app.sandbox.stop(chat)
  t.match(await answers(), /^alive\n0\n$/, 'a restart clears it')
})
