import { defineError } from '../../core/errors.js'

/** The chat has no outputs (or none that may be archived). */
export const FILES_NOTHING_TO_ARCHIVE = defineError('FILES_NOTHING_TO_ARCHIVE', 'nothing_to_archive', 'there are no output files to archive', 404)
/** The archive would exceed the file-count or byte limit; checked before streaming starts. */
export const FILES_ARCHIVE_TOO_LARGE = defineError('FILES_ARCHIVE_TOO_LARGE', 'archive_too_large', 'the outputs exceed the archive limit: %s', 413)
/** This chat's archive slots stayed taken for the whole wait (one archive per chat by default). */
export const FILES_ARCHIVE_IN_PROGRESS = defineError('FILES_ARCHIVE_IN_PROGRESS', 'archive_in_progress', 'an archive of this chat is already being downloaded; retry in %d s, when it has finished', 429)
/**
 * 429 (not 503): every server-wide slot for this kind of work stayed taken for the whole wait. A busy answer
 * is expected load shedding with a clear body; the core error handler reserves 5xx for failures (logged,
 * body without details), and clients back off on 429 + Retry-After just the same.
 */
export const FILES_SERVER_BUSY = defineError('FILES_SERVER_BUSY', 'server_busy', 'the server is busy with other %s; retry in %d s', 429)

/** A download's Range lies beyond the file (answered with a Content-Range that names the size). */
export const FILES_RANGE_NOT_SATISFIABLE = defineError('FILES_RANGE_NOT_SATISFIABLE', 'range_not_satisfiable', 'the file has %d bytes', 416)

/** An error the routes answer with a `Retry-After` header and a `retry_after` field (seconds). */
export interface RetryLater { retryAfter: number }

export function isRetryLater (err: unknown): err is RetryLater {
  return typeof err === 'object' && err !== null && 'retryAfter' in err && typeof err.retryAfter === 'number'
}

export function archiveInProgress (retryAfter: number): Error & RetryLater {
  return Object.assign(new FILES_ARCHIVE_IN_PROGRESS(retryAfter), { retryAfter, extra: { retry_after: retryAfter } })
}

export function serverBusy (what: 'archives' | 'listings', retryAfter: number): Error & RetryLater {
  return Object.assign(new FILES_SERVER_BUSY(what, retryAfter), { retryAfter, extra: { retry_after: retryAfter } })
}
