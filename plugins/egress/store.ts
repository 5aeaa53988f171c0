import { constants } from 'node:fs'
import { open } from 'node:fs/promises'
import type { FastifyBaseLogger } from 'fastify'
import { validEmail } from '../../core/identity.js'
import type { ChatStorageService } from '../chat-storage/types.js'
import { EGRESS_OVERRIDE_TOO_LARGE } from './errors.js'
import { parseLayer, parseUserDefaults, type ParsedLayer, type UserDefaults } from './layers.js'

/*
 * What egress keeps on disk:
 * - a chat's override in the chat's state file `egress.json` ({ chatId, mode, allow }) of chat storage
 *   (`chats/{K}/egress.json`, beside meta.json and outside every sandbox mount, so the data purge of an
 *   inactive chat removes it too): written atomically, read by descriptor (no symlinks, regular file,
 *   at most MAX_OVERRIDE bytes, a larger override is refused when written) and validated; a bad file
 *   is logged and ignored;
 * - the user of a chat, read from meta.json (docs/contract.md#creation) the same way;
 * - EGRESS_USERS, the operator's per-user defaults, re-read when its size or mtime changes.
 */

export const MAX_OVERRIDE = 64 * 1024
const MAX_META = 64 * 1024
export const MAX_USERS_FILE = 4 * 1024 * 1024

/** A regular file's text, opened without following a symlink; null when absent. Throws when not a regular file or larger than max. */
export async function readSmall (path: string, max: number): Promise<{ text: string, mtimeMs: number, size: number } | null> {
  let handle
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw err
  }
  try {
    const st = await handle.stat()
    if (!st.isFile()) throw new Error('not a regular file')
    if (st.size > max) throw new Error(`larger than ${max} bytes`)
    const buf = Buffer.alloc(Math.min(st.size, max) + 1)
    const { bytesRead } = await handle.read(buf, 0, buf.length, 0)
    if (bytesRead > max) throw new Error(`larger than ${max} bytes`)
    return { text: buf.subarray(0, bytesRead).toString('utf8'), mtimeMs: st.mtimeMs, size: st.size }
  } finally { await handle.close() }
}

export interface OverrideStore {
  /** The chat's stored override; null when there is none or the file is bad (logged). */
  read: (chatId: string) => Promise<ParsedLayer | null>
  /** Stores (or with null removes) the chat's override; rejects when the disk refuses. */
  write: (chatId: string, layer: ParsedLayer | null) => Promise<void>
  /** The user email meta.json records for the chat, when valid. */
  email: (chatId: string) => Promise<string | undefined>
}

export function createOverrideStore (storage: Pick<ChatStorageService, 'chatState' | 'key'>, log: FastifyBaseLogger): OverrideStore {
  return {
    async read (chatId) {
      try {
        const text = await storage.chatState(chatId).read('egress.json', MAX_OVERRIDE)
        if (text === null) return null
        const json = JSON.parse(text) as unknown
        if (typeof json !== 'object' || json === null || (json as { chatId?: unknown }).chatId !== chatId) throw new Error('it belongs to another chat')
        const { chatId: _ignored, ...layer } = json as Record<string, unknown>
        return parseLayer(layer, 'egress.json')
      } catch (err) {
        log.warn({ err, chat: storage.key(chatId) }, 'egress override file ignored (unreadable or invalid)')
        return null
      }
    },
    async write (chatId, layer) {
      const state = storage.chatState(chatId)
      if (layer === null) { await state.remove('egress.json'); return }
      // Refused (413) rather than stored and then ignored when read back. Chat storage's error names the
      // file below the data directory, which is for the log: the client is told what to change.
      try {
        await state.writeJson('egress.json', { chatId, mode: layer.layer.mode, allow: layer.layer.allow }, { maxBytes: MAX_OVERRIDE, mode: 0o644 })
      } catch (err) {
        if ((err as { code?: unknown }).code === 'CHAT_STORAGE_TOO_LARGE') throw new EGRESS_OVERRIDE_TOO_LARGE(MAX_OVERRIDE, { cause: err })
        throw err
      }
    },
    async email (chatId) {
      try {
        const meta = await storage.chatState(chatId).readJson('meta.json', MAX_META) as { chat_id?: unknown, user_email?: unknown } | null
        if (meta === null || typeof meta !== 'object') return undefined
        return meta.chat_id === chatId && typeof meta.user_email === 'string' ? validEmail(meta.user_email) : undefined
      } catch { return undefined }
    }
  }
}

export interface UsersFile {
  /** The defaults now in force (the last good version of the file). */
  current: () => UserDefaults
  /** Re-reads the file when its size or mtime changed; a bad new version is logged and the last good one kept. */
  check: () => Promise<void>
}

/** Loads EGRESS_USERS once (throws with a clear message: a bad file at boot stops the server). */
export async function loadUsersFile (path: string, log: FastifyBaseLogger): Promise<UsersFile> {
  const parse = (text: string): UserDefaults => {
    let json: unknown
    try { json = JSON.parse(text) } catch (err) { throw new TypeError(`not valid JSON (${(err as Error).message})`) }
    return parseUserDefaults(json)
  }
  const first = await readSmall(path, MAX_USERS_FILE)
  if (first === null) throw new TypeError(`${path} does not exist`)
  let defaults = parse(first.text)
  let seen = `${first.size}:${first.mtimeMs}`
  return {
    current: () => defaults,
    async check () {
      try {
        const found = await readSmall(path, MAX_USERS_FILE)
        if (found === null) {
          if (seen !== 'gone') log.error({ path }, 'EGRESS_USERS: the file is gone; keeping the previous defaults')
          seen = 'gone'
          return
        }
        const stamp = `${found.size}:${found.mtimeMs}`
        if (stamp === seen) return
        seen = stamp
        defaults = parse(found.text)
        log.info({ users: defaults.byEmail.size, domains: defaults.byDomain.size }, 'EGRESS_USERS re-read')
      } catch (err) {
        log.error({ err }, 'EGRESS_USERS: keeping the previous defaults (the file cannot be read or is invalid)')
      }
    }
  }
}
