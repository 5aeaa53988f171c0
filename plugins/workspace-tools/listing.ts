import { compactSize } from '../../core/sizes.js'
import { cutTo } from './text.js'

/*
 * Directory listings of `view` (docs/contract.md#view): two levels deep, dot-entries and bulky directories
 * shown but not descended, at most 500 lines. The sandbox runs `find` with argv (the path is one
 * argument, never shell text) and prints NUL-separated records; everything else happens here.
 */

export const LISTING_MAX_LINES = 500
/** Directories shown at depth 1 but never descended. Names starting with a dot are matched by `.*`. */
export const NOT_DESCENDED = ['node_modules', '__pycache__']
const RECORD = '%y\\0%s\\0%l\\0%P\\0'

/** argv of the listing: type, size, link target and relative path of each entry, NUL-separated. */
export function listingArgv (dir: string): string[] {
  const prune = ['(', '-name', '.*', ...NOT_DESCENDED.flatMap(n => ['-o', '-name', n]), ')']
  // -H follows the start path when it is a symlink to a directory; nothing below it is followed.
  return ['find', '-H', dir, '-mindepth', '1', '-maxdepth', '2',
    '(', '-type', 'd', ...prune, '-printf', RECORD, '-prune', ')', '-o', '-printf', RECORD]
}

export interface ListingEntry {
  /** find's %y: f d l p s c b */
  type: string
  size: number
  target: string
  rel: string
}

/** Parses listingArgv output (up to 8 MiB from the sandbox: one split, no per-record arrays). A record cut off by an output cap is dropped. */
export function parseListing (out: string): ListingEntry[] {
  const fields = out.split('\0')
  const entries: ListingEntry[] = []
  // Every complete record's last field is followed by a NUL, hence the element after it must exist.
  for (let i = 0; i + 4 < fields.length; i += 4) {
    const rel = fields[i + 3] as string
    if (rel === '') continue
    entries.push({ type: fields[i] as string, size: Number(fields[i + 1]) || 0, target: fields[i + 2] as string, rel })
  }
  return entries
}

/**
 * Sort key of a relative path: `/` becomes NUL, which sorts below every character a name can hold, so
 * plain string order puts each directory right before its own children (`src`, `src/a`, `src-old`).
 */
const sortKey = (rel: string): string => rel.replaceAll('/', '\0')

/** Orders entries so that each directory is followed by its own children. */
export function compareEntries (a: ListingEntry, b: ListingEntry): number {
  const x = sortKey(a.rel)
  const y = sortKey(b.rel)
  return x < y ? -1 : x > y ? 1 : 0
}

interface Keyed { key: string, entry: ListingEntry }
const byKey = (a: Keyed, b: Keyed): number => a.key < b.key ? -1 : a.key > b.key ? 1 : 0

/**
 * The first `n` entries in listing order, without sorting all of them: keys are computed once, and
 * once n are known anything that sorts after the n-th is dropped at once (O(entries · log n)).
 */
export function firstEntries (entries: ListingEntry[], n: number): ListingEntry[] {
  let kept: Keyed[] = []
  let cutoff: string | undefined
  for (const entry of entries) {
    const key = sortKey(entry.rel)
    if (cutoff !== undefined && key >= cutoff) continue
    kept.push({ key, entry })
    if (kept.length >= 2 * n) {
      kept = kept.sort(byKey).slice(0, n)
      cutoff = kept[n - 1]?.key
    }
  }
  return kept.sort(byKey).slice(0, n).map(k => k.entry)
}

const MARKERS: Record<string, string> = { f: 'f', d: 'd', l: 'l', p: 'p', s: 's', c: 'c', b: 'b' }

function entryLine (e: ListingEntry): string {
  const marker = MARKERS[e.type] ?? '?'
  const size = e.type === 'd' ? '-' : compactSize(e.size)
  const top = !e.rel.includes('/')
  const name = e.type === 'd' ? `${e.rel}/` : e.rel
  const note = e.type === 'l' ? ` -> ${cutTo(e.target, 300)}` : e.type === 'd' && top && (e.rel.startsWith('.') || NOT_DESCENDED.includes(e.rel)) ? '  (not expanded)' : ''
  return `${marker} ${size.padStart(6)}  ${name}${note}`
}

/** Header, one line per entry (type marker, human size, relative path), then `[... N more entries]`. */
export function formatListing (dir: string, entries: ListingEntry[], incomplete: boolean): string {
  const header = `Directory ${dir.endsWith('/') ? dir : `${dir}/`} (2 levels deep; d = directory, f = file, l = symlink; sizes in bytes, K/M/G = KiB/MiB/GiB):`
  if (entries.length === 0) return `${header}\n(empty directory)`
  const lines = firstEntries(entries, LISTING_MAX_LINES).map(entryLine)
  const more = entries.length - lines.length
  if (more > 0) lines.push(`[... ${incomplete ? 'at least ' : ''}${more} more entries]`)
  else if (incomplete) lines.push('[... more entries not listed]')
  return `${header}\n${lines.join('\n')}`
}
