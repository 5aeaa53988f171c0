import { chmod, chown, mkdir, readFile, rename, rm, stat, unlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { chatPaths, type ChatPaths } from '../../core/chat-paths.js'

/*
 * The chat's data directories on the server side (docs/contract.md#derived-names, docs/contract.md#sandbox-layout): created by the server
 * itself, `uploads` server-owned 0755, `outputs` owned by the sandbox user 0750, nothing
 * world-writable; plus meta.json (docs/contract.md#creation), which never holds a secret.
 */

export interface ChatMeta {
  chat_id: string
  user_email: string | null
  user_name: string | null
  mcp_servers: string[]
  created_at: string
  last_active_at: string
  image: string
}

async function ensureDir (path: string, mode: number): Promise<void> {
  await mkdir(path, { recursive: true, mode })
  const st = await stat(path)
  if ((st.mode & 0o7777) !== mode) await chmod(path, mode)
}

/** Creates `{dataDir}/chats/{K}/{uploads,outputs}` (bind-mount sources must exist before the container). */
export async function prepareChatDirs (dataDir: string, chatId: string): Promise<ChatPaths> {
  const paths = chatPaths(dataDir, chatId)
  await ensureDir(join(dataDir, 'chats'), 0o755)
  await ensureDir(paths.dir, 0o755)
  await ensureDir(paths.uploads, 0o755)
  await ensureDir(paths.outputs, 0o750)
  return paths
}

/** Gives `outputs` to the sandbox user (mode 0750). Returns false when the server may not chown. */
export async function chownOutputs (paths: ChatPaths, uid: number, gid: number): Promise<boolean> {
  const st = await stat(paths.outputs)
  if ((st.mode & 0o7777) !== 0o750) await chmod(paths.outputs, 0o750)
  if (st.uid === uid && st.gid === gid) return true
  try {
    await chown(paths.outputs, uid, gid)
    return true
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EPERM') return false
    throw err
  }
}

export async function readMeta (path: string): Promise<ChatMeta | null> {
  try {
    const parsed = JSON.parse(await readFile(path, 'utf8')) as Partial<ChatMeta>
    return typeof parsed === 'object' && parsed !== null && typeof parsed.chat_id === 'string' ? parsed as ChatMeta : null
  } catch { return null }
}

/** Atomic replace (temporary file in the same directory, then rename). */
export async function writeMeta (path: string, meta: ChatMeta): Promise<void> {
  const tmp = `${path}.${process.pid}.${Math.random().toString(16).slice(2)}.tmp`
  try {
    await writeFile(tmp, `${JSON.stringify(meta, null, 2)}\n`, { mode: 0o644 })
    await rename(tmp, path)
  } catch (err) {
    await unlink(tmp).catch(() => {})
    throw err
  }
}

export async function exists (path: string): Promise<boolean> {
  try { await stat(path); return true } catch { return false }
}

/** Deletes a chat's data directory (purge). */
export async function removeChatDir (dataDir: string, key: string): Promise<void> {
  if (!/^[0-9a-f]{32}$/.test(key)) throw new TypeError('not a chat key')
  await rm(join(dataDir, 'chats', key), { recursive: true, force: true })
}

/** Write probe for /ready. */
export async function probeWritable (dataDir: string): Promise<boolean> {
  const probe = join(dataDir, `.ready-probe-${process.pid}`)
  try {
    await mkdir(dataDir, { recursive: true })
    await writeFile(probe, 'ok')
    await unlink(probe)
    return true
  } catch { return false }
}
