import type { EngineErrorReason, EngineFailure } from '../sandbox/types.js'

/*
 * The Kubernetes engine's one error type: what the API server answered (its HTTP status and the
 * metav1.Status reason) and whether it was reachable at all. kube-client.ts throws nothing else.
 * An unreachable server (refused, unknown host, TLS failure) is `unavailable`; a time-out, a cut-off
 * connection, 429 TooManyRequests and 500/503/504 answers that say so are `busy` (retriable).
 */

/** The network failed before any answer: nothing listens, the host is unknown, the TLS handshake failed. */
const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOENT', 'EACCES', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'ENOTFOUND',
  'EADDRNOTAVAIL', 'CERT_HAS_EXPIRED', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'SELF_SIGNED_CERT_IN_CHAIN', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'ERR_TLS_CERT_ALTNAME_INVALID'])
/** The request was cut off mid-way: busy (the server may answer the next one). */
const CUT_OFF = new Set(['ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ECONNABORTED', 'ERR_SOCKET_CLOSED', 'ABORT_ERR', 'UND_ERR_SOCKET',
  'ERR_STREAM_PREMATURE_CLOSE', 'KUBE_TIMEOUT'])

export class KubeError extends Error implements EngineFailure {
  readonly statusCode: number | undefined
  readonly unavailable: boolean
  readonly busy: boolean
  readonly reason: EngineErrorReason | undefined
  /** the metav1.Status reason (NotFound, AlreadyExists, Conflict, Invalid, …), when the server sent one */
  readonly kubeReason: string | undefined
  constructor (message: string, o: { statusCode?: number, kubeReason?: string, unavailable?: boolean, busy?: boolean, reason?: EngineErrorReason, cause?: unknown } = {}) {
    super(message, { cause: o.cause })
    this.name = 'KubeError'
    this.statusCode = o.statusCode
    this.kubeReason = o.kubeReason
    this.unavailable = o.unavailable === true
    this.busy = o.busy === true && !this.unavailable
    this.reason = o.reason
  }

  /** The same failure in the contract's words for the call that met it. */
  as (reason: EngineErrorReason, message = this.message): KubeError {
    return new KubeError(message, { statusCode: this.statusCode, kubeReason: this.kubeReason, unavailable: this.unavailable, busy: this.busy, reason, cause: this })
  }
}

/** An error of the HTTP or WebSocket layer (no answer): unavailable or busy by its code. */
export function networkError (what: string, err: unknown): KubeError {
  if (err instanceof KubeError) return err
  const code = (err as { code?: string } | null)?.code ?? ''
  const message = `Kubernetes API: ${what}: ${err instanceof Error ? err.message : String(err)}`
  const unreachable = UNREACHABLE.has(code) || code.startsWith('ERR_TLS') || code.startsWith('ERR_SSL')
  // Anything else (a cut-off connection, an error without a code such as a WebSocket closed during its
  // upgrade) happened to a server that answered before: busy, retriable, not an outage.
  return new KubeError(message, { unavailable: unreachable, busy: !unreachable || CUT_OFF.has(code), cause: err })
}

/** A metav1.Status answer (or any non-2xx answer) as a KubeError. */
export function statusError (what: string, statusCode: number, body: unknown): KubeError {
  const s = (typeof body === 'object' && body !== null ? body : {}) as { message?: unknown, reason?: unknown }
  const text = typeof s.message === 'string' ? s.message.slice(0, 1000) : `HTTP ${statusCode}`
  const kubeReason = typeof s.reason === 'string' ? s.reason.slice(0, 100) : undefined
  const busy = statusCode === 429 || statusCode === 504 || kubeReason === 'Timeout' || kubeReason === 'ServerTimeout' || kubeReason === 'TooManyRequests'
  // A proxy in front of an API server that is down answers 502/503.
  const unavailable = statusCode === 502 || (statusCode === 503 && kubeReason === undefined)
  const reason: EngineErrorReason | undefined = statusCode === 409 && (kubeReason === 'AlreadyExists' || kubeReason === 'Conflict') ? 'conflict' : undefined
  return new KubeError(`Kubernetes API: ${what}: ${text}`, { statusCode, kubeReason, busy, unavailable, reason })
}

export function isNotFound (err: unknown): boolean { return err instanceof KubeError && err.statusCode === 404 }
export function isConflict (err: unknown): boolean { return err instanceof KubeError && err.statusCode === 409 }
