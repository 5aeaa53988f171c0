/*
 * One walk of a chat's outputs for GET /api/outputs (surface.md §6.3). The walk is bounded three ways:
 * at most `scanLimit` files are examined, only the `maxEntries` newest are held (NewestHeap), and after
 * `budgetMs` the listing answers with what it has. Every bound that cuts the result sets `truncated`.
 */
import { MAX_PATH_BYTES, walkRegularFiles, type WalkEntry } from '../../core/safe-path.js'
import type { LinkService } from '../capabilities/types.js'
import { mimeOf, typeClassOf } from './mime.js'
import { NewestHeap, type Kept } from './newest.js'
import type { OutputEntry, OutputsListing } from './schemas.js'

export interface ListingLimits {
  /** Entries in the answer (§6.3: 5,000). */
  maxEntries: number
  /** Files examined by one walk. */
  scanLimit: number
  /** Milliseconds after which the walk is cut short. */
  budgetMs: number
}

export interface NewestWalk {
  /** The newest files, newest first. */
  kept: Kept[]
  truncated: boolean
  /** Settles once the walker has really stopped (a walk cut by the budget finishes its current step). */
  settled: Promise<void>
}

// U+0000–U+001F, U+007F and `\`: parseRelPath (§6.4 item 1) refuses them, so such a file has no working URL.
// eslint-disable-next-line no-control-regex
const UNSERVABLE = /[\u0000-\u001f\u007f\\]/

/** True when the listed URL of this path would download it (the download route's syntax rules). */
export function servable (relPath: string): boolean {
  return !UNSERVABLE.test(relPath) && (relPath.length * 3 <= MAX_PATH_BYTES || Buffer.byteLength(relPath, 'utf8') <= MAX_PATH_BYTES)
}

type Step = IteratorResult<WalkEntry, undefined> | 'out of time'

/** Walks `root` (dot entries skipped, links never followed) and keeps the newest servable files. */
export async function walkNewest (root: string, limits: ListingLimits): Promise<NewestWalk> {
  const heap = new NewestHeap(limits.maxEntries)
  const walk = walkRegularFiles(root, { skipDot: true, limit: limits.scanLimit + 1 })
  let scanned = 0
  let outOfTime = false
  let wake: ((step: Step) => void) | undefined
  const timer = setTimeout(() => { outOfTime = true; wake?.('out of time') }, limits.budgetMs).unref()
  let settled: Promise<void> = Promise.resolve()
  try {
    for (;;) {
      const pending = walk.next()
      // A fresh promise per step (not Promise.race on one long-lived timer promise, which keeps a reaction per step).
      const step = await new Promise<Step>((resolve, reject) => {
        wake = resolve
        if (outOfTime) resolve('out of time')
        pending.then(resolve, reject)
      })
      if (step === 'out of time') {
        settled = pending.then(async () => { await walk.return(undefined) }).then(() => {}, () => {})
        break
      }
      if (step.done === true) break
      if (++scanned > limits.scanLimit) break
      const { relPath, size, mtimeMs } = step.value
      if (servable(relPath)) heap.offer({ relPath, size, mtimeMs })
    }
  } finally {
    clearTimeout(timer)
    wake = undefined
  }
  if (!outOfTime) await walk.return(undefined)
  return { kept: heap.sorted(), truncated: outOfTime || scanned > limits.scanLimit || heap.dropped > 0, settled }
}

/** The §6.3 body, serialised once: every waiter of a listing (and the cache) shares this one buffer. */
export function serializeListing (chatId: string, walk: Pick<NewestWalk, 'kept' | 'truncated'>, links: LinkService): Buffer {
  const files: OutputEntry[] = walk.kept.map(e => {
    const name = e.relPath.slice(e.relPath.lastIndexOf('/') + 1)
    const mime = mimeOf(name)
    return { name, path: e.relPath, size: e.size, modified: e.mtimeMs / 1000, type: typeClassOf(name, mime), mime, url: links.filePath(chatId, e.relPath) }
  })
  const listing: OutputsListing = { chat_id: chatId, files, total: files.length, timestamp: Date.now() / 1000 }
  if (walk.truncated) listing.truncated = true
  return Buffer.from(JSON.stringify(listing))
}
