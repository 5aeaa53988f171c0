import type { ChatMeta, StateFiles } from './types.js'

/*
 * The chat's meta record, `meta.json` (docs/contract.md#creation): written by the sandbox core through
 * chat-storage only (created with the chat's first sandbox, rewritten when the caller changes and at most
 * once a minute for last_active_at), read back by the purge pass and for the last known user. It never
 * holds a secret. Read as untrusted: bounded, and a record of the wrong shape counts as none.
 */

export const META_FILE = 'meta.json'
/** Far above a real record (a few hundred bytes; mcp_servers is bounded by the request headers). */
export const META_MAX_BYTES = 64 * 1024

const str = (v: unknown): v is string => typeof v === 'string'
const strOrNull = (v: unknown): v is string | null => v === null || typeof v === 'string'

/** The record when `value` has its shape, else null (fields of another type are not guessed at). */
export function parseMeta (value: unknown): ChatMeta | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null
  const m = value as Record<string, unknown>
  if (!str(m.chat_id) || !strOrNull(m.user_email ?? null) || !strOrNull(m.user_name ?? null)) return null
  const servers = Array.isArray(m.mcp_servers) ? m.mcp_servers.filter(str) : []
  return {
    chat_id: m.chat_id,
    user_email: (m.user_email as string | null | undefined) ?? null,
    user_name: (m.user_name as string | null | undefined) ?? null,
    mcp_servers: servers,
    created_at: str(m.created_at) ? m.created_at : '',
    last_active_at: str(m.last_active_at) ? m.last_active_at : '',
    image: str(m.image) ? m.image : ''
  }
}

/** The chat's record, or null when it has none or it is unreadable (too large, not JSON, not a regular file, wrong shape). */
export async function readMetaFrom (state: StateFiles): Promise<ChatMeta | null> {
  try {
    return parseMeta(await state.readJson(META_FILE, META_MAX_BYTES))
  } catch { return null }
}

export async function writeMetaTo (state: StateFiles, meta: ChatMeta): Promise<void> {
  await state.writeJson(META_FILE, meta, { maxBytes: META_MAX_BYTES, mode: 0o644 })
}
