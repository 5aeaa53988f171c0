/*
 * The adapter's one error type: what Docker answered (status) and whether the engine was reachable
 * at all. docker-client.ts and docker-monitor.ts throw nothing else.
 */

export class DockerError extends Error {
  /** HTTP status from the engine, when it answered */
  readonly statusCode: number | undefined
  /** true when the engine could not be reached at all (socket refused, missing, timed out) */
  readonly unavailable: boolean
  constructor (message: string, statusCode: number | undefined, unavailable: boolean, cause?: unknown) {
    super(message, { cause })
    this.name = 'DockerError'
    this.statusCode = statusCode
    this.unavailable = unavailable
  }
}

const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOENT', 'EACCES', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH',
  'ENETUNREACH', 'EAI_AGAIN', 'ENOTFOUND', 'ABORT_ERR', 'ECONNABORTED', 'ERR_SOCKET_CLOSED', 'EADDRNOTAVAIL'])

export function toDockerError (err: unknown, what: string): DockerError {
  if (err instanceof DockerError) return err
  const e = err as { statusCode?: number, code?: string, name?: string, message?: string, json?: { message?: string } | null }
  const status = typeof e?.statusCode === 'number' ? e.statusCode : undefined
  const detail = (typeof e?.json?.message === 'string' ? e.json.message : undefined) ?? e?.message ?? String(err)
  const unavailable = status === undefined && (UNREACHABLE.has(e?.code ?? '') || e?.name === 'AbortError' || e?.name === 'TimeoutError')
  return new DockerError(`${what}: ${detail.trim()}`, status, unavailable, err)
}
