import { createError } from '@fastify/error'

/** 404 `sandbox_not_running`: the chat has no running sandbox (nothing here ever starts one). */
export const CDP_SANDBOX_NOT_RUNNING = createError('CDP_SANDBOX_NOT_RUNNING', 'the chat has no running sandbox', 404)
/** 503 `browser_unavailable`: the browser in the sandbox did not answer in time, or answered nonsense. */
export const CDP_BROWSER_UNAVAILABLE = createError('CDP_BROWSER_UNAVAILABLE', 'the browser in the sandbox is not available: %s', 503)
/** 429 `too_many_viewers`: the chat (or the server) already has the maximum number of open browser sockets. */
export const CDP_TOO_MANY_VIEWERS = createError('CDP_TOO_MANY_VIEWERS', 'too many open browser connections: %s', 429)

/** 503 with the wire name of docs/contract.md#browser (5xx errors otherwise answer `internal_error`). */
export function browserUnavailable (reason: string, cause?: unknown): Error {
  return Object.assign(new CDP_BROWSER_UNAVAILABLE(reason, cause === undefined ? undefined : { cause }), { wireCode: 'browser_unavailable' })
}
