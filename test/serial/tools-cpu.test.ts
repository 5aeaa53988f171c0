/*
 * one chat's str_replace must not freeze the server. The real transport, Docker
 * sandbox and tools over HTTP with the SDK client; /health is polled during each call and the event
 * loop's delay is measured. Bounds are relative to the same measurements just before (this machine is
 * shared and loaded), with absolute floors: the old code held the loop for 31 s on the first attack.
 */
import t from 'tap'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { dockerOrSkip } from '../integration/docker.js'
import { bash, client, textOf, toolsApp } from '../plugins/workspace-tools/integration-app.js'

const gate = await dockerOrSkip()

interface Watch { stop: () => Promise<{ maxHealthMs: number, maxLoopDelayMs: number, polls: number }> }

/** Polls GET /health every 50 ms (one in flight) and records the slowest answer and the loop's worst delay. */
function watch (url: string): Watch {
  const loop = monitorEventLoopDelay({ resolution: 10 })
  loop.enable()
  let running = true
  let maxHealthMs = 0
  let polls = 0
  const poller = (async () => {
    while (running) {
      const started = performance.now()
      const res = await fetch(`${url}/health`)
      await res.text()
      if (!res.ok) throw new Error(`/health answered ${res.status}`)
      maxHealthMs = Math.max(maxHealthMs, performance.now() - started)
      polls++
      await new Promise(resolve => setTimeout(resolve, 50))
    }
  })()
  return {
    async stop () {
      running = false
      await poller
      loop.disable()
      return { maxHealthMs, maxLoopDelayMs: loop.max / 1e6, polls }
    }
  }
}

t.test('str_replace on adversarial input keeps the server answering', gate, async t => {
  const { url } = await toolsApp(t)
  const c = await client(t, url, 'wt-cpu')
  /** The call's wall time and the CPU time of this process (server and client) while it ran. */
  const replace = async (path: string, oldStr: string): Promise<{ ms: number, cpuMs: number, result: CallToolResult }> => {
    const started = performance.now()
    const cpu = process.cpuUsage()
    const result = await c.callTool({ name: 'str_replace', arguments: { description: 'attack', path, old_str: oldStr, new_str: 'x' } }) as CallToolResult
    const used = process.cpuUsage(cpu)
    return { ms: performance.now() - started, cpuMs: (used.user + used.system) / 1000, result }
  }
  t.equal(textOf(await bash(c, 'head -c 250000 /dev/zero | tr "\\0" a > small.txt; head -c 4194304 /dev/zero | tr "\\0" a > big.txt; wc -c < big.txt')), '4194304\n')

  const attacks: Array<[string, string, string]> = [
    // The measurement: the whitespace-hint regex held Node for 31 s.
    ['small.txt', 'a'.repeat(1999) + 'b', '250,000 a, old_str 1,999 a + b'],
    ['big.txt', 'a'.repeat(1999) + 'b', '4 MiB of a, old_str 1,999 a + b'],
    // V8's indexOf alone is quadratic here (the mismatch lies before the needle's last 250 characters).
    ['big.txt', 'a'.repeat(5000) + 'b' + 'a'.repeat(5000), '4 MiB of a, old_str a×5,000 + b + a×5,000']
  ]
  for (const [path, oldStr, name] of attacks) {
    // Baseline: the same file, the same I/O, a short old_str that is not there either.
    const calm = watch(url)
    const baseline = await replace(path, 'not-in-the-file')
    const quiet = await calm.stop()
    t.match(textOf(baseline.result), /^Error: old_str not found in /)

    const busy = watch(url)
    const attack = await replace(path, oldStr)
    const seen = await busy.stop()
    t.equal(attack.result.isError, true, `${name}: an error result`)
    t.match(textOf(attack.result), /^Error: old_str not found in \/home\/assistant\/(small|big)\.txt\. It must match/, `${name}: not found, no hint`)
    // The work the attack adds: under 1 s of CPU (about 100 ms on an idle machine; the old code: 31 s and more).
    t.ok(attack.cpuMs - baseline.cpuMs < 1000, `${name}: ${attack.cpuMs.toFixed(0)} ms of CPU (the same call without the attack: ${baseline.cpuMs.toFixed(0)} ms)`)
    // Wall time: under 1 s more than the same call without the attack, scaled when the shared machine is so
    // loaded that the plain call is slow too (CPU time, above, is the measure that load does not distort).
    const wallBound = Math.max(1000, 5 * baseline.ms)
    t.ok(attack.ms - baseline.ms < wallBound, `${name}: answered in ${attack.ms.toFixed(0)} ms (without the attack: ${baseline.ms.toFixed(0)} ms; bound +${wallBound.toFixed(0)} ms)`)
    t.ok(seen.polls > 0, `${name}: /health answered ${seen.polls} times during the call`)
    const healthBound = Math.max(200, 5 * quiet.maxHealthMs)
    t.ok(seen.maxHealthMs < healthBound, `${name}: slowest /health ${seen.maxHealthMs.toFixed(0)} ms (bound ${healthBound.toFixed(0)} ms)`)
    const loopBound = Math.max(200, 5 * quiet.maxLoopDelayMs)
    t.ok(seen.maxLoopDelayMs < loopBound, `${name}: worst event-loop delay ${seen.maxLoopDelayMs.toFixed(0)} ms (bound ${loopBound.toFixed(0)} ms)`)
  }

  // The hint still works at this size: one space too many, far into the file.
  await bash(c, 'printf "%s\\nneedle  here\\n" "$(head -c 1000000 /dev/zero | tr "\\0" a)" > hint.txt')
  const hint = await replace('hint.txt', 'needle here')
  t.match(textOf(hint.result), /matches except for whitespace .* starts at line 2;/)
})
