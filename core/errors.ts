import { createError } from '@fastify/error'
import Type from 'typebox'

export const CORE_INVALID_CONFIG = createError('CORE_INVALID_CONFIG', 'Invalid setting %s: %s', 500, TypeError)
export const CORE_INVALID_PLUGIN_OPTIONS = createError('CORE_INVALID_PLUGIN_OPTIONS', "Invalid options for plugin '%s': %s", 500, TypeError)
export const CORE_INVALID_CHAT_ID = createError('CORE_INVALID_CHAT_ID', 'invalid chat id: %s', 400)
export const CORE_UNAUTHORIZED = createError('CORE_UNAUTHORIZED', 'missing or invalid credentials', 401)
export const CORE_FORBIDDEN = createError('CORE_FORBIDDEN', '%s', 403)
/** 403 `forbidden_origin`: a browser page whose Origin may not use a chat route (core/origin.ts). */
export const CORE_FORBIDDEN_ORIGIN = createError('CORE_FORBIDDEN_ORIGIN', 'this page\'s Origin may not use this route: only pages of PUBLIC_BASE_URL and ALLOWED_ORIGINS may, and an embedded (opaque-origin) page only with a capability token', 403)
export const CORE_TOO_MANY_FAILURES = createError('CORE_TOO_MANY_FAILURES', 'too many failed authentication attempts; retry later', 429)

/** Every non-MCP error body (docs/contract.md#general-http-rules). */
export const ErrorResponse = Type.Object({
  error: Type.String({ description: 'snake_case code' }),
  detail: Type.String({ description: 'human readable explanation' })
}, { additionalProperties: true })

/**
 * Maps our error codes to the wire's snake_case names. Plugin codes not listed here are lowercased
 * with their prefix removed (UPLOAD_TOO_LARGE → too_large) unless the error carries `wireCode`.
 */
const WIRE: Record<string, string> = {
  CORE_INVALID_CHAT_ID: 'invalid_chat_id',
  CORE_UNAUTHORIZED: 'Unauthorized',
  CORE_FORBIDDEN: 'forbidden',
  CORE_TOO_MANY_FAILURES: 'too_many_requests',
  FST_ERR_CTP_BODY_TOO_LARGE: 'payload_too_large',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupported_media_type',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'bad_request',
  FST_ERR_CTP_INVALID_JSON_BODY: 'bad_request',
  FST_ERR_NOT_FOUND: 'not_found'
}

export function wireCode (code: string | undefined, status: number): string {
  if (code !== undefined && WIRE[code] !== undefined) return WIRE[code]
  if (code !== undefined && /^[A-Z]+_[A-Z_]+$/.test(code) && !code.startsWith('FST_')) {
    return code.slice(code.indexOf('_') + 1).toLowerCase()
  }
  return status >= 500 ? 'internal_error' : status === 404 ? 'not_found' : 'bad_request'
}
