import { defineError } from '../../core/errors.js'

/** The chat has no running sandbox (nothing here ever starts one). */
export const CDP_SANDBOX_NOT_RUNNING = defineError('CDP_SANDBOX_NOT_RUNNING', 'sandbox_not_running', 'the chat has no running sandbox', 404)
/** The browser in the sandbox did not answer in time, or answered nonsense: named on the wire although a 5xx (docs/contract.md#browser). */
export const CDP_BROWSER_UNAVAILABLE = defineError('CDP_BROWSER_UNAVAILABLE', 'browser_unavailable', 'the browser in the sandbox is not available: %s', 503)
/** The chat (or the server) already has the maximum number of open browser sockets. */
export const CDP_TOO_MANY_VIEWERS = defineError('CDP_TOO_MANY_VIEWERS', 'too_many_viewers', 'too many open browser connections: %s', 429)
