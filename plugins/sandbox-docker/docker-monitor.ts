import type Docker from 'dockerode'
import { toDockerError } from './docker-error.js'
import type { ResourceStats, SandboxEngine } from '../sandbox/types.js'

/*
 * The monitoring half of the Docker adapter: what the daemon itself reports about a container's
 * resources (pids, memory, OOM kills), the disk usage of containers and volumes, and the storage
 * driver. docker-client.ts builds it over the same dockerode instance; nothing here trusts a number
 * that a process inside a sandbox could forge.
 */

export type MonitorClient = Pick<SandboxEngine, 'stats' | 'oomKills' | 'diskUsage' | 'storageInfo'>

const NATIVE_QUOTA = new Set(['btrfs', 'zfs', 'devicemapper', 'windowsfilter'])

/**
 * Whether a writable-layer quota (`StorageOpt.size`) is worth trying, from `docker info`: overlay2
 * enforces one only on xfs mounted with pquota; btrfs, zfs, devicemapper and windowsfilter natively.
 */
export function quotaFor (driver: string, backingFs: string): boolean {
  if (driver === 'overlay2' || driver === 'overlay') return backingFs.toLowerCase() === 'xfs'
  return NATIVE_QUOTA.has(driver)
}

/** Bytes of event stream read at most: a few OOM events are ~1 KiB each. */
const EVENTS_MAX_BYTES = 256 * 1024

async function dial<T> (docker: Docker, what: string, options: Record<string, unknown>): Promise<T> {
  return await new Promise<T>((resolve, reject) => {
    docker.modem.dial({ method: 'GET', statusCodes: { 200: true, 400: 'bad parameter', 404: 'not found', 500: 'server error' }, ...options } as never,
      (err, data) => { if (err !== null) reject(toDockerError(err, what)); else resolve(data as T) })
  })
}

const num = (v: unknown): number => typeof v === 'number' && Number.isFinite(v) ? v : 0

interface RawStats {
  pids_stats?: { current?: number, limit?: number }
  memory_stats?: { usage?: number, limit?: number, stats?: Record<string, number> }
}

export function parseStats (raw: RawStats): ResourceStats {
  const m = raw.memory_stats ?? {}
  // cgroup v1 reports total_inactive_file, v2 inactive_file: page cache the kernel can drop at once.
  const cache = num(m.stats?.total_inactive_file ?? m.stats?.inactive_file)
  const limit = num(m.limit)
  return {
    pids: { current: num(raw.pids_stats?.current), limit: num(raw.pids_stats?.limit) },
    // An unlimited cgroup reports the host's memory (or 2^63) as its limit.
    memory: { usage: Math.max(0, num(m.usage) - cache), limit: limit >= 2 ** 62 ? 0 : limit }
  }
}

async function readBounded (stream: NodeJS.ReadableStream, max: number): Promise<string> {
  return await new Promise(resolve => {
    const chunks: Buffer[] = []
    let size = 0
    const done = (): void => { resolve(Buffer.concat(chunks).toString('utf8')) }
    stream.on('data', (c: Buffer) => {
      if (size >= max) return
      chunks.push(c)
      size += c.length
      if (size >= max) { (stream as unknown as { destroy?: () => void }).destroy?.(); done() }
    })
    stream.on('end', done)
    stream.on('close', done)
    stream.on('error', done)
  })
}

export function createMonitorClient (docker: Docker, timeoutMs: number): MonitorClient {
  const signal = (ms = timeoutMs): AbortSignal => AbortSignal.timeout(ms)
  return {
    async stats (id) {
      const raw = await dial<RawStats>(docker, 'container stats', {
        path: `/containers/${encodeURIComponent(id)}/stats?`, options: { stream: false, 'one-shot': true }, abortSignal: signal()
      })
      return parseStats(raw)
    },

    async oomKills (id, sinceMs, untilMs) {
      const seconds = (ms: number): string => (ms / 1000).toFixed(3)
      const stream = await dial<NodeJS.ReadableStream>(docker, 'events', {
        path: '/events?',
        options: { since: seconds(sinceMs), until: seconds(Math.max(untilMs, sinceMs)), filters: { type: ['container'], container: [id], event: ['oom'] } },
        isStream: true,
        abortSignal: signal()
      })
      const text = await readBounded(stream, EVENTS_MAX_BYTES)
      let n = 0
      for (const line of text.split('\n')) {
        if (line.includes('"oom"')) n++
      }
      return n
    },

    async diskUsage () {
      // `type` narrows the work on API ≥ 1.42; older daemons ignore it and report everything.
      const raw = await dial<{
        Containers?: Array<{ Id: string, Names?: string[], Labels?: Record<string, string> | null, SizeRw?: number }> | null
        Volumes?: Array<{ Name: string, Labels?: Record<string, string> | null, UsageData?: { Size?: number } | null }> | null
      }>(docker, 'disk usage', { path: '/system/df?', options: { type: ['container', 'volume'] }, abortSignal: signal(Math.max(timeoutMs, 120_000)) })
      return {
        sandboxes: (raw.Containers ?? []).map(c => ({
          id: c.Id, name: (c.Names?.[0] ?? '').replace(/^\//, ''), labels: c.Labels ?? {}, writable: Math.max(0, num(c.SizeRw))
        })),
        volumes: (raw.Volumes ?? []).map(v => ({ name: v.Name, labels: v.Labels ?? {}, size: typeof v.UsageData?.Size === 'number' ? v.UsageData.Size : -1 }))
      }
    },

    async storageInfo () {
      const info = await dial<{ Driver?: string, DriverStatus?: Array<[string, string]> | null }>(docker, 'info', { path: '/info', abortSignal: signal() })
      const backing = (info.DriverStatus ?? []).find(([k]) => k === 'Backing Filesystem')?.[1] ?? ''
      const driver = info.Driver ?? ''
      return { driver, backingFs: backing, quota: quotaFor(driver, backing) }
    }
  }
}
