import { defineError, INTERNAL_ERROR } from '../../core/errors.js'

/** A state file name or scope that is not a plain name (a programming error, never client input). */
export const CHAT_STORAGE_BAD_NAME = defineError('CHAT_STORAGE_BAD_NAME', INTERNAL_ERROR, 'not a valid storage name: %s', 500, TypeError)
/** A state file (or the text about to be written) is larger than the caller's bound. Its message names the file for the log: callers that answer a client wrap it. */
export const CHAT_STORAGE_TOO_LARGE = defineError('CHAT_STORAGE_TOO_LARGE', 'storage_too_large', '%s is larger than %d bytes', 413)
/** A state file is a symlink, a directory or a special file: refused, never followed. */
export const CHAT_STORAGE_NOT_REGULAR = defineError('CHAT_STORAGE_NOT_REGULAR', INTERNAL_ERROR, '%s is not a regular file (%s)', 500)
/** The target of an area write is an existing directory. */
export const CHAT_STORAGE_IS_DIRECTORY = defineError('CHAT_STORAGE_IS_DIRECTORY', 'storage_is_directory', 'the path names an existing directory', 400)
/** A directory the storage created or must use is not a real directory (a symlink or a file in its place). */
export const CHAT_STORAGE_NOT_DIRECTORY = defineError('CHAT_STORAGE_NOT_DIRECTORY', INTERNAL_ERROR, '%s is not a directory', 500)
