import { createError } from '@fastify/error'

/** 404: the chat has no outputs (or none that may be archived). */
export const FILES_NOTHING_TO_ARCHIVE = createError('FILES_NOTHING_TO_ARCHIVE', 'there are no output files to archive', 404)
/** 413: the archive would exceed the file-count or byte limit; checked before streaming starts. */
export const FILES_ARCHIVE_TOO_LARGE = createError('FILES_ARCHIVE_TOO_LARGE', 'the outputs exceed the archive limit: %s', 413)
