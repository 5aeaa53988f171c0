/*
 * The steps of a new chat's first bash_tool call, from the server's own Docker API requests
 * (bench/server-probe.mjs traces them): which engine request it waited for, how long each took, and
 * the time between them that is the server's own (files, hooks, the agent's answer). Each step is
 * the median over the chats; offsets are from the moment the client sent the call.
 */
import type { TraceEvent } from './probe-types.js'
import { docker, median } from './common.js'

/** One chat's first call as the bench client saw it (absolute ms, server-probe's clock). */
export interface FirstCall { chatId: string, container: string, sent: number, answered: number }

const PROBE = /^\/bin\/sh -c rm/
const AGENT = /cubicle-agent/

const base = (path: string): string => path.split('?')[0]?.replace(/^\/v[\d.]+/, '') ?? path

/** exec id → container id, asked of the engine while the containers still exist. */
export async function execOwners (events: TraceEvent[]): Promise<Map<string, string>> {
  const ids = new Set<string>()
  for (const e of events) { const m = /^\/exec\/([0-9a-f]{64})\//.exec(base(e.path)); if (m?.[1] !== undefined) ids.add(m[1]) }
  const owners = new Map<string, string>()
  await Promise.all([...ids].map(async id => {
    const info = await docker.getExec(id).inspect().catch(() => null) as { ContainerID?: string } | null
    if (info?.ContainerID !== undefined) owners.set(id, info.ContainerID)
  }))
  return owners
}

type Step = { name: string, from: number, to: number }

/** The steps of one first call; `id` is its container's id. */
function steps (call: FirstCall, id: string, events: TraceEvent[], owners: Map<string, string>, shared: boolean): Step[] {
  const mine = events.filter(e => e.kind === 'client' && e.start >= call.sent && e.start <= call.answered)
  const ofContainer = (e: TraceEvent): boolean => {
    const p = base(e.path)
    if (p === '/containers/create') return e.path.includes(`name=${call.container}`)
    const ex = /^\/exec\/([0-9a-f]{64})\//.exec(p)?.[1]
    if (ex !== undefined) return owners.get(ex) === id
    return p.startsWith(`/containers/${id}/`) || p.startsWith(`/containers/${call.container}/`)
  }
  const own = mine.filter(ofContainer)
  const out: Step[] = []
  // One call at a time: the engine requests that name no container (volumes, images) are its own too.
  if (shared) {
    for (const e of mine) {
      const p = base(e.path)
      if (!p.startsWith('/containers/') && !p.startsWith('/exec/')) out.push({ name: `${e.method} ${p.replace(/[0-9a-f]{64}/g, '<id>')}`, from: e.start, to: e.end ?? e.start })
    }
  }
  const execStarts = own.filter(e => /^\/exec\/[0-9a-f]+\/start$/.test(base(e.path)))
  const execInspects = own.filter(e => /^\/exec\/[0-9a-f]+\/json$/.test(base(e.path)))
  for (const e of own) {
    const p = base(e.path)
    const end = e.end ?? e.start
    if (p === '/containers/create') out.push({ name: 'container create', from: e.start, to: end })
    else if (p.endsWith('/start') && p.startsWith('/containers/')) out.push({ name: 'container start', from: e.start, to: end })
    else if (p.endsWith('/rename')) out.push({ name: 'pool claim: rename', from: e.start, to: end })
    else if (p.endsWith('/archive')) out.push({ name: 'README put (archive)', from: e.start, to: end })
    else if (p.endsWith('/json') && p.startsWith('/containers/')) out.push({ name: 'container inspect', from: e.start, to: end })
    else if (p.endsWith('/exec')) {
      // The exec's start is the first one after its create (same container).
      const s = execStarts.find(x => x.start >= end)
      if (s !== undefined) execStarts.splice(execStarts.indexOf(s), 1)
      if (e.cmd !== undefined && AGENT.test(e.cmd)) {
        out.push({ name: 'agent open: exec create+start', from: e.start, to: s?.upgrade ?? s?.end ?? end })
        if (s?.firstData !== undefined) {
          out.push({ name: 'agent open: python start → hello', from: s.upgrade ?? s.start, to: s.firstData })
          if (s.firstData < call.answered) out.push({ name: 'hello → answer (command through the agent, MCP reply)', from: s.firstData, to: call.answered })
        }
      } else {
        const what = e.cmd !== undefined && PROBE.test(e.cmd) ? 'ready probe' : `exec ${e.cmd ?? '?'}`
        const inspect = execInspects.find(x => s !== undefined && x.start >= (s.streamEnd ?? s.start))
        out.push({ name: `${what} (create, start, output, inspect)`, from: e.start, to: inspect?.end ?? s?.streamEnd ?? end })
      }
    }
  }
  return out.sort((a, b) => a.from - b.from)
}

/** Per step: median offset from the call's start and median duration, plus the server's own time. */
export async function firstCallTimeline (calls: FirstCall[], events: TraceEvent[], shared = true): Promise<string[]> {
  const owners = await execOwners(events)
  const ids = new Map<string, string>()
  for (const c of calls) {
    const info = await docker.getContainer(c.container).inspect().catch(() => null)
    if (info !== null) ids.set(c.container, info.Id)
  }
  const byName = new Map<string, { offset: number[], dur: number[], order: number[] }>()
  const totals: number[] = []
  const own: number[] = []
  const each: Array<{ total: number, steps: Step[], sent: number }> = []
  for (const c of calls) {
    const id = ids.get(c.container)
    if (id === undefined) continue
    const s = steps(c, id, events, owners, shared)
    totals.push(c.answered - c.sent)
    // Engine time: the union of the steps' intervals (they may overlap).
    let busy = 0
    let reach = c.sent
    for (const x of s) { const from = Math.max(x.from, reach); if (x.to > from) { busy += x.to - from; reach = x.to } }
    own.push(c.answered - c.sent - busy)
    each.push({ total: c.answered - c.sent, steps: s, sent: c.sent })
    s.forEach((x, i) => {
      const b = byName.get(x.name) ?? { offset: [], dur: [], order: [] }
      b.offset.push(x.from - c.sent); b.dur.push(x.to - x.from); b.order.push(i)
      byName.set(x.name, b)
    })
  }
  const lines = [...byName].sort((a, b) => median(a[1].offset) - median(b[1].offset))
    .map(([name, b]) => `    +${median(b.offset).toFixed(0).padStart(5)} ms  ${name}: ${median(b.dur).toFixed(1)} ms${b.dur.length < totals.length ? ` (${b.dur.length} of ${totals.length} calls)` : ''}`)
  const total = median(totals)
  // The call of median length, as it happened (medians of steps of different calls need not add up).
  const typical = [...each].sort((a, b) => a.total - b.total)[Math.floor(each.length / 2)]
  const story = typical === undefined
    ? []
    : [`    the median call (${typical.total.toFixed(0)} ms) as it happened: ` +
    typical.steps.map(x => `+${(x.from - typical.sent).toFixed(0)} ${x.name} ${(x.to - x.from).toFixed(0)}`).join(' → ')]
  return [...lines, ...story, `    total ${total.toFixed(1)} ms, of which the server's own time outside engine/agent requests ${median(own).toFixed(1)} ms (medians over ${totals.length} calls)`]
}
