import { createError } from '@fastify/error'

export const UPLOAD_TOO_LARGE = createError('UPLOAD_TOO_LARGE', 'the upload exceeds the limit of %d bytes', 413)
export const UPLOAD_NOT_MULTIPART = createError('UPLOAD_NOT_MULTIPART', 'send the file as multipart/form-data in the field "file"', 415)
export const UPLOAD_MISSING_FILE = createError('UPLOAD_MISSING_FILE', 'the multipart body has no file field named "file"', 400)
export const UPLOAD_TARGET_IS_DIRECTORY = createError('UPLOAD_TARGET_IS_DIRECTORY', 'the upload path names an existing directory', 400)
export const UPLOAD_WRITE_FAILED = createError('UPLOAD_WRITE_FAILED', 'the upload could not be written', 500)
export const UPLOAD_NOT_FOUND = createError('UPLOAD_NOT_FOUND', 'upload not found', 404)
export const UPLOAD_READ_TOO_LARGE = createError('UPLOAD_READ_TOO_LARGE', 'the file has %d bytes, more than the %d that can be read at once', 413)

/** 413 with the wire shape of docs/contract.md#files-and-uploads: `{"error":"payload_too_large","detail":…,"limit":<bytes>}`. */
export function tooLarge (limit: number): Error {
  return Object.assign(new UPLOAD_TOO_LARGE(limit), { wireCode: 'payload_too_large', extra: { limit } })
}

/** 500 `{"error":"write_failed",…}` keeping the cause for the log. */
export function writeFailed (cause: unknown): Error {
  return Object.assign(new UPLOAD_WRITE_FAILED({ cause }), { wireCode: 'write_failed' })
}
