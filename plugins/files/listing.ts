/*
 * One walk of a chat's outputs for GET /api/outputs (docs/contract.md#files-and-uploads). The walk is bounded three ways:
 * at most `scanLimit` files are examined, only the `maxEntries` newest are held (NewestHeap), and after
 * `budgetMs` the listing answers with what it has. Every bound that cuts the result sets `truncated`.
 */
import { MAX_PATH_BYTES } from '../../core/safe-path.js'
import type { LinkService } from '../capabilities/types.js'
import { mimeOf } from '../../core/mime.js'
import { typeClassOf } from './mime.js'
import { NewestHeap, type Kept } from './newest.js'
import type { OutputEntry, OutputsListing } from './schemas.js'
import { walkWithin } from './walk-budget.js'

export interface ListingLimits {
  /** Entries in the answer (docs/contract.md#files-and-uploads: 5,000). */
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

// U+0000–U+001F, U+007F and `\`: parseRelPath (docs/contract.md#path-rules) refuses them, so such a file has no working URL.
// eslint-disable-next-line no-control-regex
const UNSERVABLE = /[\u0000-\u001f\u007f\\]/

/** True when the listed URL of this path would download it (the download route's syntax rules). */
export function servable (relPath: string): boolean {
  return !UNSERVABLE.test(relPath) && (relPath.length * 3 <= MAX_PATH_BYTES || Buffer.byteLength(relPath, 'utf8') <= MAX_PATH_BYTES)
}

/** Walks `root` (dot entries skipped, links never followed) and keeps the newest servable files. */
export async function walkNewest (root: string, limits: ListingLimits): Promise<NewestWalk> {
  const heap = new NewestHeap(limits.maxEntries)
  let scanned = 0
  const walk = await walkWithin(root, { skipDot: true, limit: limits.scanLimit + 1 }, limits.budgetMs, ({ relPath, size, mtimeMs }) => {
    if (++scanned > limits.scanLimit) return false
    if (servable(relPath)) heap.offer({ relPath, size, mtimeMs })
    return true
  })
  return { kept: heap.sorted(), truncated: walk.outOfTime || scanned > limits.scanLimit || heap.dropped > 0, settled: walk.settled }
}

/** The docs/contract.md#files-and-uploads body, serialised once: every waiter of a listing (and the cache) shares this one buffer. */
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
