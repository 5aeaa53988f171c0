/*
 * (c)/(h): `chats` new chats at once, each making `calls` bash_tool calls in a row. Every failure is
 * counted by message; latencies are split into first calls (the chat's sandbox is created) and the
 * calls after it; the server's memory is split (heap, external, array buffers) before the load and
 * at `chats` live chats; the machine's CPU over the load is split by process (bench/cpu.ts). With
 * BENCH_PROFILE=1 also a V8 CPU profile of the server during the load and the steps of the first
 * calls from the server's own Docker requests (bench/timeline.ts); with BENCH_HEAP_SNAPSHOT=1 heap
 * snapshots before the load and at `chats` live chats, and what grew per chat (bench/heap-summary.ts).
 */
import { cpus, tmpdir } from 'node:os'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { bash, client, docker, ms, now, pct, PREFIX, rssMiB, serverLog, sleep, wall, type Server } from './common.js'
import { cpuSample, cpuSplit, summarizeProfile } from './cpu.js'
import { firstCallTimeline, type FirstCall } from './timeline.js'
import { growth, heapByClass, topClasses } from './heap-summary.js'
import type { TraceEvent } from './probe-types.js'
import { sandboxNames } from '../plugins/sandbox/names.js'

export interface Memory { rss: number, heapUsed: number, heapTotal: number, external: number, arrayBuffers: number, spaces: Record<string, number>, handles: number }
export interface LoadResult {
  lines: string[]
  errors: number
  containers: number
  /** chats with exactly one container found by the chat's label or its deterministic name */
  onePerChat: number
  p99: number
  /** p99 of the calls after each chat's first */
  laterP99: number
  rssLive: number
}

const MiB = 1048576
const mib = (n: number): string => (n / MiB).toFixed(0)

export function memoryLine (m: Memory): string {
  const spaces = Object.entries(m.spaces).sort((a, b) => b[1] - a[1]).slice(0, 3).map(([name, v]) => `${name} ${mib(v)}`).join(', ')
  return `RSS ${mib(m.rss)}: JS heap used ${mib(m.heapUsed)} of ${mib(m.heapTotal)} MiB [${spaces}], external ${mib(m.external)} (array buffers ${mib(m.arrayBuffers)}), handles ${m.handles}`
}

/** Log lines (message and first stack frames) of the internal-error refs the load saw. */
function internalErrorTrace (refs: string[]): string[] {
  if (refs.length === 0) return []
  const lines = readFileSync(serverLog, 'utf8').split('\n')
  return refs.slice(0, 5).map(ref => {
    const line = lines.find(l => l.includes(`"reqId":"${ref}"`) && l.includes('tool failed unexpectedly'))
    if (line === undefined) return `    ref ${ref}: no log line in ${serverLog}`
    const err = (JSON.parse(line) as { err?: { message?: string, stack?: string } }).err
    return `    ref ${ref}: ${(err?.stack ?? err?.message ?? line).split('\n').slice(0, 6).join(' | ')}`
  })
}

/** The load's containers, by chat: found by the chat's label (`cu.chat-key`, where the engine sets it) or its deterministic name. */
async function ours (label: string, chats: number): Promise<{ all: Array<{ Id: string }>, onePerChat: number }> {
  const list = await docker.listContainers({ all: true, filters: { label: [`cu.prefix=${PREFIX}`] } })
  const all: Array<{ Id: string }> = []
  let onePerChat = 0
  for (let chat = 0; chat < chats; chat++) {
    const n = sandboxNames(PREFIX, `bench-${label}-${chat}`)
    const mine = list.filter(c => c.Labels['cu.chat-key'] === n.key || c.Names.includes(`/${n.container}`))
    all.push(...mine)
    if (mine.length === 1) onePerChat++
  }
  return { all, onePerChat }
}

/** What a load counts its sandboxes by, and the goals its lines name; the defaults are the Docker engine's (h). */
export interface LoadOptions {
  /** the load's sandboxes (Docker container ids) and the chats with exactly one */
  count?: (label: string, chats: number) => Promise<{ all: Array<{ Id: string }>, onePerChat: number }>
  /** what a sandbox is called in the lines (container, pod) */
  unit?: string
  goals?: { rssMiB: number, laterMs: number }
  /**
   * Paced arrival instead of all at once: at most this many chats in their first call at a time (a chat
   * arrives when one before it is answered: the rate the engine creates sandboxes), and the later calls
   * start together once every chat's first call was answered, so they are measured with all chats live.
   */
  arrival?: number
}

export async function benchLoad (server: Server, label: string, chats: number, calls: number, opts: LoadOptions = {}): Promise<LoadResult> {
  const goal = opts.goals ?? { rssMiB: 120, laterMs: 500 }
  const unit = opts.unit ?? 'container'
  const profile = process.env.BENCH_PROFILE === '1'
  const pid = server.child.pid ?? 0
  const before = await server.ask<Memory>({ op: 'memory' })
  const snapshots = process.env.BENCH_HEAP_SNAPSHOT === '1'
  const snapshotFile = (when: string): string => join(tmpdir(), `cubicle-bench-${PREFIX}-${label}-${when}.heapsnapshot`)
  if (snapshots) await server.ask({ op: 'heap', file: snapshotFile('before') })
  const failures = new Map<string, number>()
  const refs: string[] = []
  const fail = (message: string): void => {
    const ref = /internal error \(ref ([^)]+)\)/.exec(message)?.[1]
    if (ref !== undefined) refs.push(ref)
    const key = message.replace(/\(ref [^)]+\)/, '(ref …)').slice(0, 120)
    failures.set(key, (failures.get(key) ?? 0) + 1)
  }
  const first: number[] = []
  const later: number[] = []
  const firstCalls: FirstCall[] = []
  let lastFirst = 0
  let peakRss = rssMiB(pid)
  const sampler = setInterval(() => { peakRss = Math.max(peakRss, rssMiB(pid)) }, 200)
  if (profile) { await server.ask({ op: 'cpu-start' }); await server.ask({ op: 'trace-start' }) }
  const cpu0 = cpuSample(pid, [])
  const t0 = now()
  // Paced arrival (opts.arrival): a slot per chat in its first call, and a barrier before the later calls.
  let laterFrom = 0
  const pace = opts.arrival === undefined ? undefined : { free: opts.arrival, queue: [] as Array<() => void>, left: chats, all: undefined as unknown as Promise<void>, open: () => {} }
  if (pace !== undefined) pace.all = new Promise<void>(resolve => { pace.open = resolve })
  const arrive = async (): Promise<void> => {
    if (pace === undefined) return
    if (pace.free > 0) { pace.free--; return }
    await new Promise<void>(resolve => pace.queue.push(resolve))
  }
  const answered = (): void => {
    if (pace === undefined) return
    const next = pace.queue.shift()
    if (next !== undefined) next(); else pace.free++
    if (--pace.left === 0) { laterFrom = now() - t0; pace.open() }
  }
  await Promise.all(Array.from({ length: chats }, async (_, chat) => {
    const chatId = `bench-${label}-${chat}`
    await arrive()
    const c = await client(chatId)
    for (let call = 0; call < calls; call++) {
      if (call === 1 && pace !== undefined) await pace.all
      const s = now()
      const sent = wall()
      try {
        const out = await bash(c, `echo ${chat}-${call}`)
        if (out !== `${chat}-${call}\n`) fail(`wrong output: ${out.slice(0, 60)}`)
      } catch (err) { fail(err instanceof Error ? err.message : String(err)) }
      const took = now() - s
      if (call === 0) {
        first.push(took)
        lastFirst = Math.max(lastFirst, now() - t0)
        firstCalls.push({ chatId, container: sandboxNames(PREFIX, chatId).container, sent, answered: wall() })
        answered()
      } else later.push(took)
    }
    await c.close()
  }))
  const wallMs = now() - t0
  clearInterval(sampler)
  const { all: live, onePerChat } = await (opts.count ?? ours)(label, chats)
  const cpu1 = cpuSample(pid, live.map(c => c.Id))
  const lines: string[] = []
  if (profile) {
    const file = join(tmpdir(), `cubicle-bench-${PREFIX}-${label}.cpuprofile`)
    await server.ask({ op: 'cpu-stop', file })
    const { events } = await server.ask<{ events: TraceEvent[] }>({ op: 'trace-stop' })
    lines.push(...summarizeProfile(JSON.parse(readFileSync(file, 'utf8'))), `    (profile kept: ${file})`)
    lines.push('    first calls under load, step by step (offset from the call, duration; engine requests of the chat\'s own container):',
      ...await firstCallTimeline(firstCalls, events, false))
  }
  // Every chat's sandbox is still running here: the memory of `chats` live chats after the load settled.
  await sleep(2000)
  const rssLive = rssMiB(pid)
  const after = await server.ask<Memory>({ op: 'memory' })
  if (snapshots) {
    await server.ask({ op: 'heap', file: snapshotFile('live') })
    const a = heapByClass(snapshotFile('before'))
    const b = heapByClass(snapshotFile('live'))
    lines.push(`    heap snapshot before: ${topClasses(a)}`, `    heap snapshot at ${chats} live chats: ${topClasses(b)}`,
      `    heap growth: ${growth(a, b, chats)} (snapshots kept: ${snapshotFile('before')}, ${snapshotFile('live')})`)
  }
  const created = live.length
  // The next scenario starts without these sandboxes (the server finds them gone and does not mind).
  await Promise.all(live.map(async c => await docker.getContainer(c.Id).remove({ force: true }).catch(() => {})))
  const errors = [...failures.values()].reduce((a, b) => a + b, 0)
  const all = [...first, ...later]
  const per = (k: 'rss' | 'heapUsed' | 'external' | 'arrayBuffers'): string => `${((after[k] - before[k]) / chats / 1024).toFixed(0)} KiB`
  return {
    errors,
    containers: created,
    onePerChat,
    p99: pct(all, 0.99),
    laterP99: pct(later, 0.99),
    rssLive,
    lines: [`(${label}) ${chats}×${calls} calls in ${(wallMs / 1000).toFixed(1)} s: errors ${errors} (goal 0), ${unit}s ${created}, chats with exactly one by label or name ${onePerChat} (goal ${chats}), ` +
      `p50 ${ms(pct(all, 0.5))}, p99 ${ms(pct(all, 0.99))}, server RSS peak ${peakRss.toFixed(0)} MiB, ${rssLive.toFixed(0)} MiB at ${chats} live chats (goal ≤ ${goal.rssMiB} MiB)`,
    ...[...failures].sort((a, b) => b[1] - a[1]).map(([m, n]) => `    ${n} × ${m}`),
    ...internalErrorTrace(refs),
    ...(pace === undefined ? [] : [`    paced arrival: at most ${opts.arrival ?? 0} chats in their first call at once; the later calls began together at ${(laterFrom / 1000).toFixed(1)} s, all ${chats} chats live`]),
    `    first calls (sandbox created): p50 ${ms(pct(first, 0.5))}, p90 ${ms(pct(first, 0.9))}, max ${ms(Math.max(...first))}, the last answered at ${(lastFirst / 1000).toFixed(1)} s; ` +
      `later calls (warm, through the agent): p50 ${ms(pct(later, 0.5))}, p99 ${ms(pct(later, 0.99))} (goal ≤ ${goal.laterMs} ms), max ${ms(Math.max(...later))}`,
    `    ${cpuSplit(cpu0, cpu1, cpus().length)}`,
    `    server memory before: ${memoryLine(before)}`,
    `    server memory at ${chats} live chats: ${memoryLine(after)}; per chat: RSS ${per('rss')}, heap ${per('heapUsed')}, external ${per('external')} (array buffers ${per('arrayBuffers')})`,
    ...lines]
  }
}
