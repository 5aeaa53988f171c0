/*
 * Where the machine's CPU went during a window, measured ("explain any goal not met with a
 * measured profile"): the whole machine (root cpuacct cgroup), dockerd, containerd, the
 * containerd-shims of the run's containers (with the runc processes they reaped), the run's containers
 * themselves (their cpuacct cgroups: agent, bash, the command), the server and the bench process;
 * the rest is other work on the machine. And a summary of a V8 CPU profile by function and by package.
 */
import { readdirSync, readFileSync } from 'node:fs'

const TICK_MS = 10 // USER_HZ 100 on Linux
const CGROUP = '/sys/fs/cgroup/cpuacct'

function read (path: string): string | null {
  try { return readFileSync(path, 'utf8') } catch { return null }
}

/** utime + stime (+ reaped children) of one process, in ms. */
function procMs (pid: number, children = true): number {
  const stat = read(`/proc/${pid}/stat`)
  if (stat === null) return 0
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number)
  // fields 14–17 of stat(5), counted from `state` (field 3) at index 0
  const own = (f[11] ?? 0) + (f[12] ?? 0)
  return (own + (children ? (f[13] ?? 0) + (f[14] ?? 0) : 0)) * TICK_MS
}

function pidsOf (match: (comm: string, cmdline: string) => boolean): number[] {
  const pids: number[] = []
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue
    const comm = read(`/proc/${d}/comm`)?.trim() ?? ''
    if (!comm.startsWith('dockerd') && !comm.startsWith('containerd')) continue
    if (match(comm, (read(`/proc/${d}/cmdline`) ?? '').replace(/\0/g, ' '))) pids.push(Number(d))
  }
  return pids
}

export interface CpuSample { at: number, total: number, dockerd: number, containerd: number, shims: number, containers: number, server: number, bench: number }

/** A snapshot; `ids` are the run's container ids (their shims and cgroups are counted). */
export function cpuSample (serverPid: number, ids: string[]): CpuSample {
  const mine = new Set(ids)
  const shimPids = pidsOf((comm, cmd) => comm.startsWith('containerd-shim') && [...mine].some(id => cmd.includes(id)))
  const usage = (path: string): number => Number(read(path) ?? 0) / 1e6
  const self = process.cpuUsage()
  return {
    at: performance.now(),
    total: usage(`${CGROUP}/cpuacct.usage`),
    dockerd: pidsOf(c => c === 'dockerd').reduce((a, p) => a + procMs(p), 0),
    containerd: pidsOf(c => c === 'containerd').reduce((a, p) => a + procMs(p, false), 0),
    shims: shimPids.reduce((a, p) => a + procMs(p), 0),
    containers: ids.reduce((a, id) => a + usage(`${CGROUP}/docker/${id}/cpuacct.usage`), 0),
    server: procMs(serverPid),
    bench: (self.user + self.system) / 1000
  }
}

/** The CPU each part used between two samples, as CPU-seconds and as a share of the machine's. */
export function cpuSplit (a: CpuSample, b: CpuSample, cores: number): string {
  const wallS = (b.at - a.at) / 1000
  const d = (k: keyof CpuSample): number => Math.max(0, b[k] - a[k]) / 1000
  const parts: Array<[string, number]> = [['dockerd', d('dockerd')], ['containerd', d('containerd')], ['shims+runc', d('shims')],
    ['containers', d('containers')], ['server', d('server')], ['bench client', d('bench')]]
  const known = parts.reduce((s, [, v]) => s + v, 0)
  parts.push(['other', Math.max(0, d('total') - known)])
  return `CPU over ${wallS.toFixed(1)} s (${cores} cores = ${(wallS * cores).toFixed(1)} CPU-s; used ${d('total').toFixed(1)}): ` +
    parts.map(([n, v]) => `${n} ${v.toFixed(1)} s (${(100 * v / Math.max(1e-9, d('total'))).toFixed(0)} %)`).join(', ')
}

interface ProfileNode { id: number, callFrame: { functionName: string, url: string, lineNumber: number }, hitCount?: number, children?: number[] }
interface Profile { nodes: ProfileNode[], samples: number[], timeDeltas: number[], startTime: number, endTime: number }

/** Where a V8 profile's samples went: top functions (self time) and packages/files, as shares. */
export function summarizeProfile (profile: Profile, top = 12): string[] {
  const byId = new Map(profile.nodes.map(n => [n.id, n]))
  // The probe's own work (starting the profiler) is not the server's.
  const probe = new Set<number>()
  const mark = (id: number): void => { probe.add(id); for (const c of byId.get(id)?.children ?? []) mark(c) }
  for (const n of profile.nodes) if (n.callFrame.url.includes('server-probe')) mark(n.id)
  const self = new Map<number, number>()
  profile.samples.forEach((id, i) => { if (!probe.has(id)) self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)) })
  const total = [...self.values()].reduce((a, b) => a + b, 0)
  const fn = new Map<string, number>()
  const area = new Map<string, number>()
  for (const [id, us] of self) {
    const cf = byId.get(id)?.callFrame
    if (cf === undefined) continue
    const where = cf.url.replace(/^file:\/\//, '')
    const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(where)?.[1]
    const group = cf.url === ''
      ? `(${cf.functionName === '' ? 'native' : cf.functionName})`
      : pkg !== undefined ? pkg : where.startsWith('node:') ? 'node internals' : (/\/((?:plugins\/[^/]+)|core|bench)\//.exec(where)?.[1] ?? where)
    area.set(group, (area.get(group) ?? 0) + us)
    const name = `${cf.functionName === '' ? '(anonymous)' : cf.functionName} ${pkg ?? where.split('/').slice(-2).join('/')}:${cf.lineNumber + 1}`
    fn.set(name, (fn.get(name) ?? 0) + us)
  }
  const share = (us: number): string => `${(100 * us / Math.max(1, total)).toFixed(1)} %`
  const list = (m: Map<string, number>): string => [...m].sort((a, b) => b[1] - a[1]).slice(0, top).map(([k, v]) => `${k} ${share(v)}`).join('; ')
  return [`    server CPU profile: ${(total / 1e6).toFixed(1)} s sampled over ${((profile.endTime - profile.startTime) / 1e6).toFixed(1)} s`,
    `    by area: ${list(area)}`, `    top functions (self): ${list(fn)}`]
}
