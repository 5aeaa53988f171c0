/*
 * Where a new chat's first bash_tool result spends its time (goals (b) and (i) of bench/run.ts), measured:
 * the server runs with bench/server-probe.mjs tracing its Docker API requests; new chats call one after
 * another (nothing else of ours runs), each step of each first call is timed (bench/timeline.ts), and
 * the raw baseline (create, start, exec with dockerode) is timed step by step in alternation.
 *
 *   npx tsx bench/profile-first-call.ts            pool empty (SANDBOX_POOL_SIZE=0): goal (b)
 *   BENCH_POOL=2 npx tsx bench/profile-first-call.ts   pool hit, against `docker start`: goal (i)
 *   BENCH_CALLS=8 (default 6) chats; BENCH_AGENT=false for the docker exec path; BENCH_ABLATE=1 adds what
 *   the engine's create and start pay for each part of the sandbox's configuration (bench/ablate.ts).
 */
import { BASE, bash, client, docker, median, ms, now, PREFIX, profileSession, rawContainer, rawExec, sleep, wall } from './common.js'
import { firstCallTimeline, type FirstCall } from './timeline.js'
import { ablateStart, cloneOf } from './ablate.js'
import type { TraceEvent } from './probe-types.js'
import { sandboxNames } from '../plugins/sandbox/names.js'

const POOL = Number(process.env.BENCH_POOL ?? 0)
const CALLS = Number(process.env.BENCH_CALLS ?? 6)

async function poolFull (): Promise<void> {
  for (let w = 0; w < 600; w++) {
    const text = await (await fetch(`${BASE}/metrics`)).text()
    if (Number(/^cubicle_sandbox_pool (\d+)/m.exec(text)?.[1] ?? 0) >= POOL) break
    await sleep(200)
  }
  await sleep(1000)
}

await profileSession(POOL, async (server, lines) => {
  // One chat first, so that boot work (network, image check) is not in the measured calls.
  const warm = await client('bench-p-warm')
  await bash(warm, 'true')
  await warm.close()
  const calls: FirstCall[] = []
  const raw: Array<Record<string, number>> = []
  const rawTotal: number[] = []
  const clone: Array<Record<string, number>> = []
  await server.ask({ op: 'trace-start' })
  for (let i = 0; i < CALLS; i++) {
    if (POOL > 0) await poolFull()
    const chatId = `bench-p-${i}`
    const c = await client(chatId)
    const sent = wall()
    await bash(c, 'echo first')
    calls.push({ chatId, container: '', sent, answered: wall() })
    await c.close()
    // The baseline in alternation: create + start + exec (pool empty), or the start alone (pool hit).
    const steps: Record<string, number> = {}
    let t = now()
    const box = await rawContainer()
    steps['container create'] = now() - t
    t = now()
    await box.start()
    steps['container start'] = now() - t
    if (POOL === 0) await rawExec(box, ['echo', 'first'], steps)
    rawTotal.push(Object.values(steps).reduce((a, b) => a + b, 0) - (POOL > 0 ? steps['container create'] ?? 0 : 0))
    raw.push(steps)
    await box.remove({ force: true })
    // The same configuration as the server's container, created and started by hand (pool empty:
    // a claimed container's bind sources moved with the claim).
    if (POOL > 0) continue
    const same: Record<string, number> = {}
    t = now()
    const twin = await docker.createContainer(await cloneOf(sandboxNames(PREFIX, chatId).container, i))
    same['container create'] = now() - t
    t = now()
    await twin.start()
    same['container start'] = now() - t
    if (POOL === 0) await rawExec(twin, ['echo', 'first'], same)
    clone.push(same)
    await twin.remove({ force: true })
  }
  const { events } = await server.ask<{ events: TraceEvent[] }>({ op: 'trace-stop' })
  for (const c of calls) c.container = sandboxNames(PREFIX, c.chatId).container
  const first = calls.map(c => c.answered - c.sent)
  const base = median(rawTotal)
  lines.push(POOL === 0
    ? `(b) first bash_tool, pool empty ${ms(median(first))} ÷ raw create+start+exec ${ms(base)} = ${(median(first) / base).toFixed(2)} (goal ≤ 1.2; ${CALLS} calls, one at a time)`
    : `(i) first bash_tool, pool hit ${ms(median(first))} ÷ docker start ${ms(base)} = ${(median(first) / base).toFixed(2)} (goal ≤ 0.3; ${CALLS} calls, pool full before each)`)
  lines.push('  the server\'s first call, step by step (offset from the call, duration):', ...await firstCallTimeline(calls, events))
  const stepsOf = (rows: Array<Record<string, number>>): string => Object.keys(rows[0] ?? {}).map(k => `${k} ${ms(median(rows.map(r => r[k] ?? 0)))}`).join(', ')
  const sum = (rows: Array<Record<string, number>>): number => median(rows.map(r => Object.entries(r).reduce((a, [k, v]) => a + (POOL > 0 && k === 'container create' ? 0 : v), 0)))
  lines.push(`  the raw baseline (plain container), step by step: ${stepsOf(raw)}`)
  if (POOL === 0) {
    lines.push(`  the server's container configuration created by hand (same image, env, limits, network, mounts, fresh volume): ${stepsOf(clone)}; ` +
    `in all ${ms(sum(clone))} (first call ÷ this = ${(median(first) / sum(clone)).toFixed(2)})`)
  }
  if (POOL === 0 && process.env.BENCH_ABLATE === '1') {
    lines.push('  the engine\'s create and start by part of the configuration (medians, in alternation):', ...await ablateStart(sandboxNames(PREFIX, calls[0]?.chatId ?? '').container, CALLS))
  }
})
