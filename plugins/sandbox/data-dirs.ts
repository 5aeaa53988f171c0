import { mkdir, stat, unlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { ChatMeta, ChatStorageService } from '../chat-storage/types.js'

export type { ChatMeta } from '../chat-storage/types.js'

/*
 * The chat's files as the sandbox core uses them: only through chat-storage (docs/contract.md#derived-names),
 * which creates the chat's directories (`uploads` server-owned 0755, `outputs` 0750 given to the sandbox
 * user, nothing world-writable), keeps its meta record (`meta.json`, docs/contract.md#creation, never a
 * secret), the chat's record of its sandbox (sandbox.json, pool-record.ts), the warm pool slots' areas and claim
 * journal, the size of outputs (the disk watchdog) and purges a chat's data. Besides the probe below the core
 * builds no path of a chat's files: an engine whose disks the server cannot see pairs with a chat-storage
 * backed by it (docs/engine.md#storage).
 */

/** What the core asks of chat-storage (the plugin's `fastify.chatStorage`). */
export type ChatStore = Pick<ChatStorageService, 'prepare' | 'readMeta' | 'readMetaOfKey' | 'writeMeta' | 'chatKeys' | 'purgeKey' |
  'chatState' | 'chatStateOfKey' | 'usage' | 'prepareSlot' | 'slotState' | 'hasSlot' | 'adoptSlot' | 'purgeSlot'>

/** The chat's record or null; never throws (an unreadable record counts as none). */
export async function loadMeta (store: ChatStore, chatId: string): Promise<ChatMeta | null> {
  return await store.readMeta(chatId).catch(() => null)
}

export async function exists (path: string): Promise<boolean> {
  try { await stat(path); return true } catch { return false }
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
