import { randomUUID } from 'node:crypto'
import { constants } from 'node:fs'
import { chmod, lstat, mkdir, open, readdir, realpath, rename, rm, unlink } from 'node:fs/promises'
import { basename, dirname, join, relative } from 'node:path'
import { chatPaths } from '../../core/chat-paths.js'
import { errnoCode } from '../../core/errno.js'
import { CORE_PATH_NOT_FOUND } from '../../core/errors.js'
import { clockDevice, touchClock } from '../../core/change-clock.js'
import { isInside, openVerified, resolveInside } from '../../core/safe-path.js'
import { walkTree, type WalkEntry, type WalkOptions, type WalkSummary } from '../../core/tree-walk.js'
import { CHAT_STORAGE_BAD_NAME, CHAT_STORAGE_IS_DIRECTORY, CHAT_STORAGE_NOT_DIRECTORY } from './errors.js'
import { createStateFiles } from './state-files.js'
import { readMetaFrom, writeMetaTo } from './chat-meta.js'
import { adoptSlot, SLOT, slotExists } from './slots.js'
import { treeUsage } from './usage.js'
import type { ChatArea, ChatStorageService, StateFiles } from './types.js'

/*
 * The local-filesystem storage engine: DATA_DIR laid out as docs/contract.md#derived-names says. This file and
 * state-files.ts are the only code (besides the sandbox driver's bind-mount sources) that knows the
 * layout; the modes are those of docs/contract.md#sandbox-layout: nothing world-writable, outputs 0750 for the sandbox user.
 */

export interface ChatStorageOptions { dataDir: string }

const KEY = /^[0-9a-f]{32}$/
const SCOPE = /^[a-z0-9][a-z0-9-]{0,63}(\/[a-z0-9][a-z0-9-]{0,63}){0,3}$/
const DIR_MODE = 0o755
const OUTPUTS_MODE = 0o750
/** The marker changeClock touches, in the chat's directory (the server's: no sandbox mounts it). */
const CLOCK_MARKER = '.change-clock'

/** mkdir -p with `mode`, then the mode fixed on an existing directory; a symlink in its place is refused. */
async function ensureDirMode (path: string, mode: number, label: string): Promise<void> {
  await mkdir(path, { recursive: true, mode })
  const info = await lstat(path)
  if (!info.isDirectory()) throw new CHAT_STORAGE_NOT_DIRECTORY(label)
  if ((info.mode & 0o7777) !== mode) await chmod(path, mode)
}

export function createChatStorage (opts: ChatStorageOptions): ChatStorageService {
  const root = opts.dataDir
  const paths = (chatId: string): ReturnType<typeof chatPaths> => chatPaths(root, chatId)
  const areaDir = (chatId: string, area: ChatArea): string => paths(chatId)[area]

  async function areaRoot (chatId: string, area: ChatArea): Promise<string | undefined> {
    const dir = areaDir(chatId, area)
    try {
      // The area itself must be a directory, never a symlink to somewhere else (both asked at once: a
      // bash_tool call walks outputs twice, docs/performance.md).
      const [info, real] = await Promise.all([lstat(dir), realpath(dir)])
      return info.isDirectory() ? real : undefined
    } catch (err) {
      if (errnoCode(err) === 'ENOENT' || errnoCode(err) === 'ENOTDIR') return undefined
      throw err
    }
  }

  async function ensureArea (chatId: string, area: ChatArea): Promise<string> {
    await mkdir(areaDir(chatId, area), { recursive: true, mode: DIR_MODE })
    const real = await areaRoot(chatId, area)
    if (real === undefined) throw new CHAT_STORAGE_NOT_DIRECTORY(`chats/${paths(chatId).key}/${area}`)
    return real
  }

  /** The area's verified root, or CORE_PATH_NOT_FOUND: a symlink in its place is never followed. */
  async function existingRoot (chatId: string, area: ChatArea): Promise<string> {
    const real = await areaRoot(chatId, area)
    if (real === undefined) throw new CORE_PATH_NOT_FOUND()
    return real
  }

  /** realpath(DATA_DIR), asked once (a failure is asked again next time). */
  let realRoot: Promise<string> | undefined
  function resolvedRoot (): Promise<string> {
    realRoot ??= realpath(root)
    realRoot.catch(() => { realRoot = undefined })
    return realRoot
  }

  /**
   * The area's files by descriptor. Its path is DATA_DIR's realpath (asked once) plus the server's own
   * directories, so no lstat and realpath per walk (a bash_tool call walks outputs twice, docs/performance.md):
   * walkTree opens the area O_NOFOLLOW and verifies the descriptor is exactly that path, so a symlink in its
   * place or above it makes it missing, as areaRoot would.
   */
  async function * walk (chatId: string, area: ChatArea, wopts: WalkOptions = {}): AsyncGenerator<WalkEntry, WalkSummary, undefined> {
    let base: string
    try {
      base = join(await resolvedRoot(), relative(root, areaDir(chatId, area)))
    } catch (err) {
      if (errnoCode(err) === 'ENOENT' || errnoCode(err) === 'ENOTDIR') return { found: false, entries: 0, exceeded: false, limited: false }
      throw err
    }
    return yield * walkTree(base, { ...wopts, resolvedBase: true })
  }

  /** DATA_DIR's device when its ctimes come from this kernel's clock (asked once; a failure is asked again next time). */
  let clockDev: Promise<number | undefined> | undefined
  async function changeClock (chatId: string, area: ChatArea): Promise<number | undefined> {
    clockDev ??= clockDevice(root).catch(() => { clockDev = undefined; return undefined })
    const dev = await clockDev
    if (dev === undefined) return undefined
    const p = paths(chatId)
    return touchClock(join(p.dir, CLOCK_MARKER), p[area], dev)
  }

  /** Creates the target's missing parents (0755), then proves the parent still resolves inside the area. */
  async function prepareParent (base: string, target: string): Promise<string> {
    const parent = dirname(target)
    await mkdir(parent, { recursive: true, mode: DIR_MODE })
    const realParent = await realpath(parent)
    if (!isInside(await realpath(base), realParent)) throw new Error('the parent directory left the area')
    return realParent
  }

  const writeAtomic: ChatStorageService['writeAtomic'] = async (chatId, area, segments, write, wopts = {}) => {
    const base = await ensureArea(chatId, area)
    const target = await resolveInside(base, segments)
    const existing = await lstat(target).catch(() => undefined)
    if (existing?.isDirectory() === true) throw new CHAT_STORAGE_IS_DIRECTORY()
    const parent = await prepareParent(base, target)
    const temp = join(parent, `.upload-${randomUUID()}.part`)
    const mode = wopts.mode ?? 0o644
    const handle = await open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode)
    try {
      await handle.chmod(mode) // the umask must not hide the file from the sandbox user
      // The write stream owns the handle from here and closes it when done (a FileHandle with a live
      // stream cannot be closed separately: close() would wait for the stream forever).
      await write(handle.createWriteStream())
      const info = await lstat(temp)
      await rename(temp, join(parent, basename(target)))
      return { size: info.size, mtimeMs: info.mtimeMs, ino: info.ino }
    } catch (err) {
      await handle.close().catch(() => {})
      await unlink(temp).catch(() => {})
      throw err
    }
  }

  function chatState (chatId: string): StateFiles {
    return stateOfKey(paths(chatId).key)
  }

  function stateOfKey (key: string): StateFiles {
    if (typeof key !== 'string' || !KEY.test(key)) throw new CHAT_STORAGE_BAD_NAME('not a chat key')
    return createStateFiles({
      root,
      dirs: [{ rel: 'chats', mode: DIR_MODE }, { rel: join('chats', key), mode: DIR_MODE }],
      label: `chats/${key}`
    })
  }

  function slotDir (slot: string): string {
    if (typeof slot !== 'string' || !SLOT.test(slot)) throw new CHAT_STORAGE_BAD_NAME('not a pool slot')
    return join(root, 'pool', slot)
  }

  /**
   * Creates `dir` (0755) with `uploads` 0755 and `outputs` 0750 below it. Who owns outputs is the sandbox
   * engine's business (engine.giveOutputs: Docker gives its bind mount's source to the sandbox user).
   */
  async function prepareAreas (dir: string, label: string, parents: string[]): Promise<void> {
    for (const p of parents) await ensureDirMode(join(root, p), DIR_MODE, p)
    await ensureDirMode(dir, DIR_MODE, label)
    await ensureDirMode(join(dir, 'uploads'), DIR_MODE, `${label}/uploads`)
    await ensureDirMode(join(dir, 'outputs'), OUTPUTS_MODE, `${label}/outputs`)
  }

  function serverState (scope: string, sopts: { dirMode?: number } = {}): StateFiles {
    if (typeof scope !== 'string' || !SCOPE.test(scope) || scope.split('/')[0] === 'chats') throw new CHAT_STORAGE_BAD_NAME(JSON.stringify(String(scope)).slice(0, 80))
    return createStateFiles({ root, dirs: [{ rel: scope, mode: sopts.dirMode ?? 0o700 }], label: scope })
  }

  async function purgeKey (key: string): Promise<void> {
    if (typeof key !== 'string' || !KEY.test(key)) throw new CHAT_STORAGE_BAD_NAME('not a chat key')
    await rm(join(root, 'chats', key), { recursive: true, force: true })
  }

  return {
    key: chatId => paths(chatId).key,
    async prepare (chatId) {
      const p = paths(chatId)
      await prepareAreas(p.dir, `chats/${p.key}`, ['chats'])
    },
    async ensureArea (chatId, area) { await ensureArea(chatId, area) },
    areaRoot,
    walk,
    changeClock,
    async open (chatId, area, segments) {
      const base = await existingRoot(chatId, area)
      return await openVerified(base, await resolveInside(base, segments))
    },
    async openWalked (chatId, area, entry) {
      return await openVerified(await existingRoot(chatId, area), entry.absPath)
    },
    writeAtomic,
    readMeta: async chatId => await readMetaFrom(chatState(chatId)),
    readMetaOfKey: async key => await readMetaFrom(stateOfKey(key)),
    writeMeta: async (chatId, meta) => { await writeMetaTo(chatState(chatId), meta) },
    chatState,
    chatStateOfKey: stateOfKey,
    serverState,
    async usage (chatId, area, limits) { return await treeUsage(areaDir(chatId, area), limits) },
    async prepareSlot (slot) { await prepareAreas(slotDir(slot), `pool/${slot}`, ['pool']) },
    slotState (slot) {
      slotDir(slot)
      return createStateFiles({ root, dirs: [{ rel: 'pool', mode: DIR_MODE }, { rel: join('pool', slot), mode: DIR_MODE }], label: `pool/${slot}` })
    },
    async hasSlot (slot) { return await slotExists(slotDir(slot)) },
    async adoptSlot (slot, chatId) { await adoptSlot(slotDir(slot), paths(chatId).dir) },
    async purgeSlot (slot) { await rm(slotDir(slot), { recursive: true, force: true }) },
    async chatKeys (limit = 100_000) {
      let names: string[]
      try { names = await readdir(join(root, 'chats')) } catch (err) {
        if (errnoCode(err) === 'ENOENT') return []
        throw err
      }
      return names.filter(k => KEY.test(k)).slice(0, limit)
    },
    async purge (chatId) { await purgeKey(paths(chatId).key) },
    purgeKey
  }
}
