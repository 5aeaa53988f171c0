import type { FileHandle } from 'node:fs/promises'
import type { Readable } from 'node:stream'
import { basename } from 'node:path'
import type { FastifyBaseLogger } from 'fastify'
import type { WalkEntry } from '../../core/safe-path.js'
import type { LinkService } from '../capabilities/types.js'
import type { ChatStorageService } from '../chat-storage/types.js'
import { archiveInProgress, FILES_ARCHIVE_TOO_LARGE, FILES_NOTHING_TO_ARCHIVE, serverBusy } from './errors.js'
import { streamZip } from './archive.js'
import { createListingCache, type Produced } from './listing-cache.js'
import { serializeListing, walkNewest } from './listing.js'
import { createKeyedSlots, createSlots, type Release } from './slots.js'
import type { FilesOptions } from './schemas.js'
import { walkWithin } from './walk-budget.js'

export interface FilesService {
  /** realpath of the chat's outputs dir; undefined when it is missing or is not a real directory. */
  outputsRoot (chatId: string): Promise<string | undefined>
  /** Opens `segments` below outputs with the docs/contract.md#path-rules checks (404 / 400 directory / 403 escape). Caller closes. */
  open (chatId: string, segments: string[]): Promise<{ handle: FileHandle, name: string }>
  /**
   * The serialised listing of docs/contract.md#files-and-uploads, newest first, capped. Concurrent and repeated calls for one chat share
   * one walk (single flight, short cache); walks across chats are limited; FILES_SERVER_BUSY (429) when no
   * walk slot frees up within `listingWaitMs`.
   */
  list (chatId: string): Promise<Buffer>
  /**
   * Takes the chat's and a global archive slot (FILES_ARCHIVE_IN_PROGRESS / FILES_SERVER_BUSY, both 429
   * after `archiveWaitMs`), plans the archive (limits or a walk over `walkBudgetMs` → 413, nothing → 404)
   * and returns the zip stream; no file is read before that. The slots are held until the stream closes.
   */
  archive (chatId: string): Promise<Readable>
}

export interface FilesDeps { links: LinkService, storage: ChatStorageService, log: FastifyBaseLogger, now?: () => number }

// Parked requests are bounded too: beyond these queues a request is answered busy at once.
const WALK_QUEUE = 128
const ARCHIVE_QUEUE = 16
const ARCHIVE_QUEUE_PER_CHAT = 2
// Retry-After (seconds) of the busy answers.
const LISTING_RETRY_S = 2
const ARCHIVE_RETRY_S = 10

export function createFilesService (deps: FilesDeps, opts: Required<FilesOptions>): FilesService {
  const { links, storage, log } = deps
  const now = deps.now ?? Date.now
  const cache = createListingCache({ ttlMs: opts.listingCacheMs, maxBytes: opts.listingCacheMaxBytes, now })
  const walkSlots = createSlots(opts.listingMaxWalks, WALK_QUEUE)
  const chatArchives = createKeyedSlots(opts.archivesPerChat, ARCHIVE_QUEUE_PER_CHAT)
  const allArchives = createSlots(opts.archivesMax, ARCHIVE_QUEUE)
  const limits = { maxEntries: opts.listingMaxEntries, scanLimit: opts.listingScanLimit, budgetMs: opts.walkBudgetMs }

  // The outputs dir itself must be a directory, never a symlink to somewhere else (chat storage checks it).
  const outputsRoot = async (chatId: string): Promise<string | undefined> => await storage.areaRoot(chatId, 'outputs')

  /** One walk under a global walk slot; the slot is kept until the walker has really stopped. */
  async function walkListing (chatId: string): Promise<Produced> {
    const release = await walkSlots.acquire(opts.listingWaitMs)
    if (release === undefined) throw serverBusy('listings', LISTING_RETRY_S)
    let settled: Promise<void> = Promise.resolve()
    try {
      const started = now()
      const root = await outputsRoot(chatId)
      const walk = root === undefined ? { kept: [], truncated: false, settled } : await walkNewest(root, limits)
      settled = walk.settled
      return { body: serializeListing(chatId, walk, links), costMs: now() - started }
    } finally {
      void settled.finally(release)
    }
  }

  /** The files to zip; over a limit → 413 (the files walked so far are the evidence, not a guess). */
  async function planArchive (root: string): Promise<{ entries: WalkEntry[], outOfTime: boolean, settled: Promise<void> }> {
    const entries: WalkEntry[] = []
    let bytes = 0
    const walk = await walkWithin(root, { skipDot: true, limit: opts.archiveMaxFiles + 1 }, opts.walkBudgetMs, entry => {
      entries.push(entry)
      bytes += entry.size
      if (entries.length > opts.archiveMaxFiles) throw new FILES_ARCHIVE_TOO_LARGE(`more than ${opts.archiveMaxFiles} files`)
      if (bytes > opts.archiveMaxBytes) throw new FILES_ARCHIVE_TOO_LARGE(`more than ${opts.archiveMaxBytes} bytes`)
      return true
    })
    return { entries, ...walk }
  }

  /** Plans and starts the zip under slots already held; `release` runs when the stream closes or on failure. */
  async function startArchive (chatId: string, release: Release): Promise<Readable> {
    let settled: Promise<void> = Promise.resolve()
    try {
      const root = await outputsRoot(chatId)
      if (root === undefined) throw new FILES_NOTHING_TO_ARCHIVE()
      const plan = await planArchive(root)
      settled = plan.settled
      if (plan.outOfTime) throw new FILES_ARCHIVE_TOO_LARGE(`listing the outputs took longer than ${opts.walkBudgetMs / 1000} s`)
      if (plan.entries.length === 0) throw new FILES_NOTHING_TO_ARCHIVE()
      const zipOptions = { log: log.child({ chatId }), stallMs: opts.archiveStallMs, minBytesPerSecond: opts.archiveMinBytesPerSecond, onClose: release }
      return streamZip(root, plan.entries, zipOptions)
    } catch (err) {
      // A walk cut by the budget may still be finishing its step: keep the slots until it has.
      void settled.finally(release)
      throw err
    }
  }

  /** Both archive slots (the chat's first, so one chat never queues for global slots it cannot use). */
  async function archiveSlots (chatId: string): Promise<Release> {
    const deadline = now() + opts.archiveWaitMs
    const releaseChat = await chatArchives.acquire(chatId, opts.archiveWaitMs)
    if (releaseChat === undefined) throw archiveInProgress(ARCHIVE_RETRY_S)
    const releaseGlobal = await allArchives.acquire(Math.max(0, deadline - now()))
    if (releaseGlobal === undefined) {
      releaseChat()
      throw serverBusy('archives', ARCHIVE_RETRY_S)
    }
    return () => { releaseGlobal(); releaseChat() }
  }

  return {
    outputsRoot,
    async open (chatId, segments) {
      const handle = await storage.open(chatId, 'outputs', segments)
      return { handle, name: basename(segments[segments.length - 1] as string) }
    },
    async list (chatId) {
      return await cache.get(chatId, async () => await walkListing(chatId))
    },
    async archive (chatId) {
      return await startArchive(chatId, await archiveSlots(chatId))
    }
  }
}
