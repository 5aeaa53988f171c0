import { defineError } from '../../core/errors.js'

export const UPLOAD_TOO_LARGE = defineError('UPLOAD_TOO_LARGE', 'payload_too_large', 'the upload exceeds the limit of %d bytes', 413)
export const UPLOAD_NOT_MULTIPART = defineError('UPLOAD_NOT_MULTIPART', 'not_multipart', 'send the file as multipart/form-data in the field "file"', 415)
export const UPLOAD_MISSING_FILE = defineError('UPLOAD_MISSING_FILE', 'missing_file', 'the multipart body has no file field named "file"', 400)
export const UPLOAD_TARGET_IS_DIRECTORY = defineError('UPLOAD_TARGET_IS_DIRECTORY', 'target_is_directory', 'the upload path names an existing directory', 400)
/** Named on the wire although a 5xx; the cause stays in the log. */
export const UPLOAD_WRITE_FAILED = defineError('UPLOAD_WRITE_FAILED', 'write_failed', 'the upload could not be written', 500)
export const UPLOAD_NOT_FOUND = defineError('UPLOAD_NOT_FOUND', 'not_found', 'upload not found', 404)
export const UPLOAD_READ_TOO_LARGE = defineError('UPLOAD_READ_TOO_LARGE', 'read_too_large', 'the file has %d bytes, more than the %d that can be read at once', 413)

/** 413 with the wire shape of docs/contract.md#files-and-uploads: `{"error":"payload_too_large","detail":…,"limit":<bytes>}`. */
export function tooLarge (limit: number): Error {
  return Object.assign(new UPLOAD_TOO_LARGE(limit), { extra: { limit } })
}
