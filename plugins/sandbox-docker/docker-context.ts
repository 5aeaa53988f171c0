import type Docker from 'dockerode'
import { toDockerError, type DockerError } from './docker-error.js'
import { Dedup, Lane, type Admission } from './engine-queue.js'

/*
 * What every part of the Docker adapter shares: the dockerode instance, the lanes that bound how
 * many requests of a kind the engine gets at once (engine-queue.ts), and run(): one request with its
 * time bound, the engine's liveness (a request cut off while the engine answers others is busy, not
 * an outage) and retries of idempotent requests that failed from load, within the caller's budget.
 */

export interface EngineLimits {
  /** container create/start/stop/kill/remove requests at once */
  lifecycle: number
  /** exec set-ups (create + start) at once */
  exec: number
  /** inspect, list, image, volume and network requests at once */
  read: number
  /** bound of one control-plane request (ms; streams have none) */
  callTimeoutMs: number
  /** longest wait for a lane when the caller gives no deadline (ms) */
  queueTimeoutMs: number
}

/** Sized for a 2-core host: dockerd's throughput does not grow past a few concurrent creates or exec set-ups. */
export const DEFAULT_ENGINE_LIMITS: EngineLimits = { lifecycle: 4, exec: 8, read: 8, callTimeoutMs: 30_000, queueTimeoutMs: 60_000 }

/** Per-request bound for control-plane calls (streams have none). */
export const CALL_TIMEOUT_MS = DEFAULT_ENGINE_LIMITS.callTimeoutMs

export type LaneName = 'lifecycle' | 'exec' | 'read'

export interface RunOptions extends Admission {
  /** idempotent: a busy failure is tried again (backoff) while the budget lasts */
  retry?: boolean
  /** bound of this request instead of callTimeoutMs */
  timeoutMs?: number
  /** identical requests in flight share one (reads only) */
  dedupKey?: string
  /** the lane slot is held by the caller already */
  ungated?: boolean
}

export interface AdapterContext {
  docker: Docker
  limits: EngineLimits
  lanes: Record<LaneName, Lane>
  /** an abort signal that fires after `ms` */
  signal: (ms?: number) => AbortSignal
  /** request options with that signal (dockerode's typings omit abortSignal on most option objects; a non-literal `{}` passes it through) */
  opt: (extra?: Record<string, unknown>, ms?: number) => {}
  /** runs one request; any failure becomes a DockerError naming `what` */
  call: <T>(what: string, fn: () => Promise<T>) => Promise<T>
  /** runs one request in a lane with its time bound, liveness and retries; `fn` gets the request's abort signal */
  run: <T>(lane: LaneName, what: string, fn: (signal: AbortSignal) => Promise<T>, o?: RunOptions) => Promise<T>
}

const MAX_ATTEMPTS = 5
const sleep = async (ms: number): Promise<void> => await new Promise(resolve => setTimeout(resolve, ms))

export function adapterContext (docker: Docker, limits: EngineLimits = DEFAULT_ENGINE_LIMITS): AdapterContext {
  const signal = (ms = limits.callTimeoutMs): AbortSignal => AbortSignal.timeout(ms)
  const lanes: Record<LaneName, Lane> = {
    lifecycle: new Lane('lifecycle', limits.lifecycle, limits.queueTimeoutMs),
    exec: new Lane('exec', limits.exec, limits.queueTimeoutMs),
    read: new Lane('read', limits.read, limits.queueTimeoutMs)
  }
  const dedup = new Dedup()
  /** when the engine last answered anything (a status counts: it is alive) */
  let lastAnswer = 0
  const answered = (err?: unknown): void => {
    if (err === undefined || typeof (err as { statusCode?: unknown })?.statusCode === 'number') lastAnswer = Date.now()
  }

  async function attempt<T> (lane: LaneName, what: string, fn: (s: AbortSignal) => Promise<T>, o: RunOptions, deadline: number): Promise<T> {
    const release = o.ungated === true ? () => {} : await lanes[lane].acquire({ deadline, signal: o.signal })
    const started = Date.now()
    try {
      const bound = Math.max(1, Math.min(o.timeoutMs ?? limits.callTimeoutMs, deadline - started))
      const s = o.signal === undefined ? signal(bound) : AbortSignal.any([signal(bound), o.signal])
      const value = await fn(s)
      answered()
      return value
    } catch (err) {
      answered(err)
      // Alive: the engine answered some request since shortly before this one started.
      throw toDockerError(err, what, lastAnswer >= started - 5000)
    } finally { release() }
  }

  async function run<T> (lane: LaneName, what: string, fn: (s: AbortSignal) => Promise<T>, o: RunOptions = {}): Promise<T> {
    const go = async (): Promise<T> => {
      const deadline = o.deadline ?? Date.now() + limits.queueTimeoutMs + (o.timeoutMs ?? limits.callTimeoutMs)
      for (let n = 0; ; n++) {
        try {
          return await attempt(lane, what, fn, o, deadline)
        } catch (err) {
          const e = err as DockerError
          const backoff = Math.min(2000, 100 * 2 ** n) * (0.5 + Math.random() / 2)
          if (o.retry !== true || !e.busy || n + 1 >= MAX_ATTEMPTS || o.signal?.aborted === true || Date.now() + backoff >= deadline) throw e
          await sleep(backoff)
        }
      }
    }
    return o.dedupKey === undefined ? await go() : await dedup.run(o.dedupKey, go)
  }

  return {
    docker,
    limits,
    lanes,
    signal,
    opt: (extra = {}, ms = limits.callTimeoutMs) => ({ ...extra, abortSignal: signal(ms) }),
    async call (what, fn) {
      try { return await fn() } catch (err) { throw toDockerError(err, what, lastAnswer >= Date.now() - limits.callTimeoutMs) }
    },
    run
  }
}
