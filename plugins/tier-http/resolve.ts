import type { FastifyRequest } from 'fastify'
import { requireChatId } from '../../core/chat-id.js'
import { headerValue, validEmail } from '../../core/identity.js'
import { TOKEN_PATH_SEGMENT } from '../../core/tokens.js'

type QueryValue = string | string[] | undefined

/** First value of a query parameter, trimmed; empty counts as absent. */
export function queryValue (value: QueryValue): string | undefined {
  const first = (Array.isArray(value) ? value[0] : value)?.trim()
  return first === undefined || first === '' ? undefined : first
}

/**
 * Last non-empty path segment of a files base URL (decoded once), skipping a trailing `~token`:
 * a capability token segment (docs/contract.md#url-shapes) is never a chat id, the chat is the segment before it.
 */
export function chatFromFileBaseUrl (raw: string): string {
  let path = raw
  try { path = new URL(raw).pathname } catch { path = raw.split(/[?#]/)[0] ?? '' }
  const segments = path.split('/').filter(s => s !== '')
  if (segments.length > 1 && TOKEN_PATH_SEGMENT.test(segments.at(-1) as string)) segments.pop()
  const last = segments.at(-1) ?? ''
  try { return decodeURIComponent(last) } catch { return last }
}

/**
 * The chat of a /system-prompt request (docs/contract.md#where-the-chat-id-comes-from): X-Chat-Id → X-OpenWebUI-Chat-Id → query
 * chat_id → last segment of query file_base_url → none. An invalid id is 400 invalid_chat_id. Under
 * SINGLE_USER_MODE=true any given chat means `default` (docs/contract.md#single-user-mode), without validation.
 */
export function resolveChat (request: FastifyRequest, query: { chat_id?: QueryValue, file_base_url?: QueryValue }, mode: string): string | undefined {
  const fileBase = queryValue(query.file_base_url)
  const raw = headerValue(request.headers, 'x-chat-id', 'x-openwebui-chat-id') ??
    queryValue(query.chat_id) ??
    (fileBase !== undefined ? chatFromFileBaseUrl(fileBase) : undefined)
  if (raw === undefined) return undefined
  if (mode === 'true') return 'default'
  return requireChatId(raw)
}

/** X-User-Email → X-OpenWebUI-User-Email → query user_email; invalid values count as absent (logged). */
export function resolveEmail (request: FastifyRequest, query: { user_email?: QueryValue }): string | undefined {
  const raw = headerValue(request.headers, 'x-user-email', 'x-openwebui-user-email') ?? queryValue(query.user_email)
  const email = validEmail(raw)
  if (raw !== undefined && email === undefined) request.log.warn('ignoring an invalid user email')
  return email
}
