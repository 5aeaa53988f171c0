/*
 * The byte cap of the user skill cache (SKILLS_CACHE_MAX_BYTES). Every entry on disk, an extracted
 * skill (`skills/<sha256>`) or a user's last good configuration (`configs/<hash>.json`), is known here
 * with its size and when it was last used. A new entry is admitted only after the least recently
 * used ones are removed until it fits; an entry a call in flight holds (pin) is never removed, so
 * when pinned entries fill the cap the new one is refused instead. Sizes count each file rounded up
 * to 4 KiB, as a file system allocates them, and 4 KiB per folder, so many tiny files cost what they
 * really take. Downloads and extractions in progress live in tmp/ until admitted (at most
 * maxConcurrentDownloads x (maxZipBytes + maxExtractBytes) beyond the cap).
 * Last use survives a restart through the entry's mtime, refreshed at most once an hour.
 */
import { randomBytes } from 'node:crypto'
import { readdir, rename, rm, stat, utimes } from 'node:fs/promises'
import { join } from 'node:path'
import type { FastifyBaseLogger } from 'fastify'
import { walkTree } from '../../core/tree-walk.js'

const BLOCK = 4096
const TOUCH_PERSIST_MS = 3600_000
const SHA256_DIR = /^[0-9a-f]{64}$/
const CONFIG_FILE = /^[0-9a-f]{32}\.json$/

/** Disk bytes of a tree as counted against the cap. */
export async function treeBytes (dir: string): Promise<number> {
  const walk = walkTree(dir)
  let bytes = 0
  let files = 0
  let step = await walk.next()
  while (step.done !== true) {
    bytes += Math.ceil(Math.max(step.value.size, 1) / BLOCK) * BLOCK
    files++
    step = await walk.next()
  }
  // The walk counts every directory entry it read; those that are not files are folders (the root too).
  return bytes + (step.value.entries - files + 1) * BLOCK
}

export const fileBytes = (size: number): number => Math.ceil(Math.max(size, 1) / BLOCK) * BLOCK

export interface CacheBudget {
  /** Records what skills/ and configs/ hold (last use = mtime), then removes the oldest while over the cap. */
  init (): Promise<void>
  /** The entry is on disk and known (a removed one is not). */
  has (key: string): boolean
  /** Marks the entry used now. */
  touch (key: string): void
  /** Holds the entry (present or about to be admitted) against removal until the returned release. */
  pin (key: string): () => void
  /**
   * Makes room for `bytes` of `key` (replacing its old size) by removing least recently used entries
   * that are not pinned, and records it as used now. False, with nothing removed, when it cannot fit.
   */
  admit (key: string, bytes: number): Promise<boolean>
  /** Drops an entry that did not reach the disk after all (its bytes are freed, no file is touched). */
  forget (key: string): void
  /** Bytes of the entries recorded. */
  used (): number
}

interface Entry { bytes: number, persisted: number }

export interface BudgetOptions {
  cacheDir: string
  maxBytes: number
  now: () => number
  /** Told after an entry was removed (the store drops its memo). */
  onEvict: (key: string) => void
}

export function createCacheBudget (opts: BudgetOptions, log: FastifyBaseLogger): CacheBudget {
  // Map order is the recency order: the first entry is the least recently used.
  const entries = new Map<string, Entry>()
  const pins = new Map<string, number>()
  let total = 0
  // admit() runs one at a time: two admissions must not both count the same free bytes.
  let queue: Promise<unknown> = Promise.resolve()

  const pathOf = (key: string): string => join(opts.cacheDir, key)

  async function remove (key: string): Promise<void> {
    const entry = entries.get(key)
    if (entry === undefined) return
    entries.delete(key)
    total -= entry.bytes
    // One rename takes it out of sight at once; the slow delete happens in tmp/.
    const gone = join(opts.cacheDir, 'tmp', `evicted-${randomBytes(8).toString('hex')}`)
    try {
      await rename(pathOf(key), gone)
      opts.onEvict(key)
      await rm(gone, { recursive: true, force: true })
    } catch (err) {
      opts.onEvict(key)
      if ((err as { code?: string }).code !== 'ENOENT') log.warn({ err, entry: key }, 'could not remove a user skill cache entry')
    }
  }

  /** Least recently used first, skipping pinned entries and `except`, until `need` bytes are free. */
  function victims (need: number, except: string): string[] | undefined {
    const out: string[] = []
    let free = opts.maxBytes - total
    for (const [key, entry] of entries) {
      if (free >= need) break
      if (key === except || (pins.get(key) ?? 0) > 0) continue
      out.push(key)
      free += entry.bytes
    }
    return free >= need ? out : undefined
  }

  async function scan (): Promise<Array<[string, number, number]>> {
    const found: Array<[string, number, number]> = []
    for (const name of await readdir(join(opts.cacheDir, 'skills')).catch(() => [])) {
      if (!SHA256_DIR.test(name)) continue
      const dir = join(opts.cacheDir, 'skills', name)
      const info = await stat(dir).catch(() => undefined)
      if (info?.isDirectory() === true) found.push([`skills/${name}`, await treeBytes(dir), info.mtimeMs])
    }
    for (const name of await readdir(join(opts.cacheDir, 'configs')).catch(() => [])) {
      if (!CONFIG_FILE.test(name)) continue
      const info = await stat(join(opts.cacheDir, 'configs', name)).catch(() => undefined)
      if (info?.isFile() === true) found.push([`configs/${name}`, fileBytes(info.size), info.mtimeMs])
    }
    return found.sort((a, b) => a[2] - b[2])
  }

  const budget: CacheBudget = {
    async init () {
      for (const [key, bytes, mtime] of await scan()) {
        entries.set(key, { bytes, persisted: mtime })
        total += bytes
      }
      const over = victims(0, '') ?? []
      for (const key of over) await remove(key)
      if (over.length > 0) log.info({ removed: over.length, bytes: total, maxBytes: opts.maxBytes }, 'user skill cache over its cap at boot: least recently used entries removed')
    },

    has: key => entries.has(key),

    touch (key) {
      const entry = entries.get(key)
      if (entry === undefined) return
      entries.delete(key)
      entries.set(key, entry)
      const now = opts.now()
      if (now - entry.persisted < TOUCH_PERSIST_MS) return
      entry.persisted = now
      const at = new Date(now)
      utimes(pathOf(key), at, at).catch(() => {})
    },

    pin (key) {
      pins.set(key, (pins.get(key) ?? 0) + 1)
      let released = false
      return () => {
        if (released) return
        released = true
        const left = (pins.get(key) ?? 1) - 1
        if (left > 0) pins.set(key, left)
        else pins.delete(key)
      }
    },

    admit (key, bytes) {
      const job = queue.then(async () => {
        const old = entries.get(key)?.bytes ?? 0
        if (bytes > opts.maxBytes) return false
        const out = victims(bytes - old, key)
        if (out === undefined) return false
        for (const victim of out) await remove(victim)
        total += bytes - (entries.get(key)?.bytes ?? 0)
        entries.delete(key)
        entries.set(key, { bytes, persisted: opts.now() })
        if (out.length > 0) log.info({ removed: out.length, bytes: total, maxBytes: opts.maxBytes }, 'user skill cache full: least recently used entries removed')
        return true
      })
      queue = job.catch(() => {})
      return job
    },

    forget (key) {
      const entry = entries.get(key)
      if (entry === undefined) return
      entries.delete(key)
      total -= entry.bytes
    },

    used: () => total
  }
  return budget
}
