import { open } from 'node:fs/promises'
import { constants } from 'node:fs'
import { chatPaths } from '../../core/chat-paths.js'
import { validEmail, type RequestUser } from '../../core/identity.js'
import { clip } from './text.js'

/*
 * The user recorded in a chat's meta.json (surface.md §5.5 item 5), for resurrect-container: the
 * sandbox is recreated for the same person (git author, README). The file lives in the server's
 * data dir, outside every sandbox mount, but is still read defensively: no symlinks, at most 64 KiB,
 * every field validated like the request header it came from.
 */

const MAX_META = 65536
const MCP_SERVER = /^[a-z0-9][a-z0-9_-]{0,63}$/

export async function readMetaUser (dataDir: string, chatId: string): Promise<RequestUser | null> {
  let handle
  try {
    handle = await open(chatPaths(dataDir, chatId).meta, constants.O_RDONLY | constants.O_NOFOLLOW)
  } catch { return null }
  let text: string
  try {
    const buf = Buffer.alloc(MAX_META)
    const { bytesRead } = await handle.read(buf, 0, MAX_META, 0)
    text = buf.subarray(0, bytesRead).toString('utf8')
  } finally { await handle.close() }
  let meta: unknown
  try { meta = JSON.parse(text) } catch { return null }
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
