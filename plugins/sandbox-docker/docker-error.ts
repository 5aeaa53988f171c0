import type { EngineErrorReason, EngineFailure } from '../sandbox/types.js'

/*
 * The adapter's one error type: what Docker answered (status) and whether the engine was reachable
 * at all. docker-client.ts and docker-monitor.ts throw nothing else.
 *
 * Three kinds of failure: the engine answered with a status (`statusCode`); the engine is
 * gone (`unavailable`: the socket is refused or missing, a proxy in front answers 502/503/504); the
 * engine is alive but slow or overloaded (`busy`: a request timed out or its connection was reset
 * while the engine answers other requests, a queue wait ran out, or dockerd itself reported a
 * timeout). A busy failure is worth retrying a moment later; an unavailable one is an outage.
 */

/** What a Docker answer means in the engine contract's words (engine-types.ts), from its status and message. */
export function reasonOf (status: number | undefined, message: string): EngineErrorReason | undefined {
  if (status === 404) {
    if (/no such container/i.test(message)) return 'no-such-sandbox'
    if (/no such image/i.test(message)) return 'image-missing'
    if (/network/i.test(message)) return 'network-missing'
    return undefined
  }
  // 409 is also Docker's answer to a call that needs a running (or unpaused) container.
  if (status === 409) return /is not running|is paused/i.test(message) ? 'not-running' : 'conflict'
  if (status === 500 && /not running|is paused|restarting/i.test(message)) return 'not-running'
  if ((status === 400 || status === 500) && /storage.?opt|quota|storage option/i.test(message)) return 'quota-refused'
  return undefined
}

export class DockerError extends Error implements EngineFailure {
  /** HTTP status from the engine, when it answered */
  readonly statusCode: number | undefined
  /** true when the engine could not be reached at all (socket refused or missing, dead daemon) */
  readonly unavailable: boolean
  /** true when the engine is alive but did not answer this request in time (load): retriable */
  readonly busy: boolean
  /** the failure in the engine contract's words, when recognised */
  readonly reason: EngineErrorReason | undefined
  constructor (message: string, statusCode: number | undefined, unavailable: boolean, cause?: unknown, busy = false, reason?: EngineErrorReason) {
    super(message, { cause })
    this.name = 'DockerError'
    this.statusCode = statusCode
    this.unavailable = unavailable
    this.busy = busy && !unavailable
    this.reason = reason ?? reasonOf(statusCode, message)
  }
}

/** The engine is not there: nothing listens, the socket is missing or forbidden, the host is unknown. */
const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOENT', 'EACCES', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN',
  'ENOTFOUND', 'EADDRNOTAVAIL'])
/** The request was cut off: a time-out or a dropped connection. Busy when the engine answers others, else gone. */
const CUT_OFF = new Set(['ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ECONNABORTED', 'ERR_SOCKET_CLOSED', 'ABORT_ERR',
  'UND_ERR_SOCKET', 'ERR_STREAM_PREMATURE_CLOSE'])
/** dockerd's own words for work it gave up on under load (a 500 with one of these is busy, not a fault). */
const ENGINE_TIMEOUT = /context deadline exceeded|timed? ?out|timeout|resource temporarily unavailable|too many open files|try again/i

export type FailureKind = 'status' | 'unreachable' | 'cut-off'

/** What kind of failure an error from dockerode or the network is (pure; see toDockerError). */
export function failureKind (err: unknown): FailureKind {
  const e = err as { statusCode?: number, code?: string, name?: string, message?: string } | null
  const status = typeof e?.statusCode === 'number' ? e.statusCode : undefined
  if (status !== undefined) return status === 502 || status === 503 || status === 504 ? 'unreachable' : 'status'
  if (UNREACHABLE.has(e?.code ?? '')) return 'unreachable'
  if (CUT_OFF.has(e?.code ?? '') || e?.name === 'AbortError' || e?.name === 'TimeoutError') return 'cut-off'
  // "socket hang up" and the like carry no code: a dropped connection.
  if (/socket hang up|premature close/i.test(e?.message ?? '')) return 'cut-off'
  return 'status'
}

/**
 * Wraps any failure of a request. `alive` says whether the engine answered any request recently: a
 * cut-off request then counts as busy, without any answer as unavailable.
 */
export function toDockerError (err: unknown, what: string, alive = false): DockerError {
  if (err instanceof DockerError) return err
  const e = err as { statusCode?: number, code?: string, name?: string, message?: string, json?: { message?: string } | null }
  const status = typeof e?.statusCode === 'number' ? e.statusCode : undefined
  const detail = (typeof e?.json?.message === 'string' ? e.json.message : undefined) ?? e?.message ?? String(err)
  const kind = failureKind(err)
  const unavailable = kind === 'unreachable' || (kind === 'cut-off' && !alive)
  const busy = (kind === 'cut-off' && alive) || (status !== undefined && status >= 500 && kind === 'status' && ENGINE_TIMEOUT.test(detail))
  return new DockerError(`${what}: ${detail.trim()}`, status, unavailable, err, busy)
}

/** A failure that says nothing about the request itself: retry it later (engine busy or gone). */
export function transient (err: unknown): boolean {
  return err instanceof DockerError && (err.unavailable || err.busy)
}
