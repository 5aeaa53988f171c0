import { createError } from '@fastify/error'

/** A state file name or scope that is not a plain name (a programming error, never client input). */
export const CHAT_STORAGE_BAD_NAME = createError('CHAT_STORAGE_BAD_NAME', 'not a valid storage name: %s', 500, TypeError)
/** A state file (or the text about to be written) is larger than the caller's bound. */
export const CHAT_STORAGE_TOO_LARGE = createError('CHAT_STORAGE_TOO_LARGE', '%s is larger than %d bytes', 413)
/** A state file is a symlink, a directory or a special file: refused, never followed. */
export const CHAT_STORAGE_NOT_REGULAR = createError('CHAT_STORAGE_NOT_REGULAR', '%s is not a regular file (%s)', 500)
/** The target of an area write is an existing directory. */
export const CHAT_STORAGE_IS_DIRECTORY = createError('CHAT_STORAGE_IS_DIRECTORY', 'the path names an existing directory', 400)
/** A directory the storage created or must use is not a real directory (a symlink or a file in its place). */
export const CHAT_STORAGE_NOT_DIRECTORY = createError('CHAT_STORAGE_NOT_DIRECTORY', '%s is not a directory', 500)
