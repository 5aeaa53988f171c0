import type { ChatStorageService } from '../chat-storage/types.js'
import { validEmail, type RequestUser } from '../../core/identity.js'
import { clip } from './text.js'

/*
 * The user recorded in a chat's meta.json (docs/contract.md#creation), for resurrect-container: the
 * sandbox is recreated for the same person (git author, README). The file lives in the chat's
 * storage, outside every sandbox mount, but is still read defensively (chat storage: by descriptor,
 * no symlinks, at most 64 KiB) and every field validated like the request header it came from.
 */

const MAX_META = 65536
const MCP_SERVER = /^[a-z0-9][a-z0-9_-]{0,63}$/

export async function readMetaUser (storage: Pick<ChatStorageService, 'chatState'>, chatId: string): Promise<RequestUser | null> {
  let meta: unknown
  // Missing, not a regular file, over 64 KiB or not JSON: no recorded user.
  try { meta = await storage.chatState(chatId).readJson('meta.json', MAX_META) } catch { return null }
  if (typeof meta !== 'object' || meta === null) return null
  const m = meta as Record<string, unknown>
  const email = validEmail(typeof m.user_email === 'string' ? m.user_email : undefined)
  // Stored already decoded: cleaned, not percent-decoded a second time.
  const name = typeof m.user_name === 'string' ? clip(m.user_name, 128) : ''
  const servers = Array.isArray(m.mcp_servers) ? m.mcp_servers.filter((s): s is string => typeof s === 'string' && MCP_SERVER.test(s)) : []
  const user: RequestUser = { emailRejected: false, mcpServers: servers.slice(0, 64), credentials: {} }
  if (email !== undefined) user.email = email
  if (name !== '') user.name = name
  return user
}
