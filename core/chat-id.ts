import { createHash } from 'node:crypto'
import { CORE_INVALID_CHAT_ID } from './errors.js'

const CHAT_ID = /^[a-z0-9][a-z0-9_:-]{0,63}$/

/**
 * Normalises a chat id (trim ASCII whitespace, lowercase ASCII) and validates it against the strict
 * allowlist of docs/contract.md#chat-id-validation. Returns null for anything else; an invalid id never reaches Docker,
 * the filesystem or the renderer.
 */
export function normalizeChatId (raw: string): string | null {
  // Only ASCII whitespace is trimmed: String#trim would also strip U+00A0 and friends.
  const trimmed = raw.replace(/^[\t\n\v\f\r ]+|[\t\n\v\f\r ]+$/g, '')
  const lower = trimmed.replace(/[A-Z]/g, c => c.toLowerCase())
  return CHAT_ID.test(lower) ? lower : null
}

/** Keys of the chats seen last (only ids of at most 64 characters, as valid ones are: the cache stays under 1 MiB). */
const KEYS_KEPT = 4096
const keys = new Map<string, string>()

/**
 * First 32 hex chars of SHA-256 of the chat id: the only form of it in Docker names and host paths.
 * Remembered for the last KEYS_KEPT chats: a request through an app preview URL asks for it several
 * times (docs/performance.md, (k)).
 */
export function chatKey (chatId: string): string {
  let key = keys.get(chatId)
  if (key !== undefined) return key
  key = createHash('sha256').update(chatId, 'utf8').digest('hex').slice(0, 32)
  if (chatId.length > 64) return key
  if (keys.size >= KEYS_KEPT) keys.delete(keys.keys().next().value as string)
  keys.set(chatId, key)
  return key
}

/** The normalised chat id, or CORE_INVALID_CHAT_ID (400 `invalid_chat_id`) for anything the allowlist refuses. */
export function requireChatId (raw: string): string {
  const chatId = normalizeChatId(raw)
  if (chatId === null) throw new CORE_INVALID_CHAT_ID('must match ^[a-z0-9][a-z0-9_:-]{0,63}$ after trimming and lowercasing')
  return chatId
}
