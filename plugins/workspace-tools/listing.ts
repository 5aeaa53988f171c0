import { humanSize } from './text.js'

/*
 * Directory listings of `view` (surface.md §3.4): two levels deep, dot-entries and bulky directories
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

/** Parses listingArgv output. A record cut off by an output cap is dropped. */
export function parseListing (out: string): ListingEntry[] {
  const fields = out.split('\0')
  const entries: ListingEntry[] = []
  // Every complete record's last field is followed by a NUL, hence the element after it must exist.
  for (let i = 0; i + 4 < fields.length; i += 4) {
    const [type, size, target, rel] = fields.slice(i, i + 4) as [string, string, string, string]
    if (rel === '') continue
    entries.push({ type, size: Number(size) || 0, target, rel })
  }
  return entries
}

/** Orders entries so that each directory is followed by its own children. */
export function compareEntries (a: ListingEntry, b: ListingEntry): number {
  const pa = a.rel.split('/')
  const pb = b.rel.split('/')
  for (let i = 0; i < Math.min(pa.length, pb.length); i++) {
    const x = pa[i] as string
    const y = pb[i] as string
    if (x !== y) return x < y ? -1 : 1
  }
  return pa.length - pb.length
}

const MARKERS: Record<string, string> = { f: 'f', d: 'd', l: 'l', p: 'p', s: 's', c: 'c', b: 'b' }

function entryLine (e: ListingEntry): string {
  const marker = MARKERS[e.type] ?? '?'
  const size = e.type === 'd' ? '-' : humanSize(e.size)
  const top = !e.rel.includes('/')
  const name = e.type === 'd' ? `${e.rel}/` : e.rel
  const note = e.type === 'l' ? ` -> ${e.target}` : e.type === 'd' && top && (e.rel.startsWith('.') || NOT_DESCENDED.includes(e.rel)) ? '  (not expanded)' : ''
  return `${marker} ${size.padStart(6)}  ${name}${note}`
}

/** Header, one line per entry (type marker, human size, relative path), then `[... N more entries]`. */
export function formatListing (dir: string, entries: ListingEntry[], incomplete: boolean): string {
  const sorted = [...entries].sort(compareEntries)
  const header = `Directory ${dir.endsWith('/') ? dir : `${dir}/`} (2 levels deep; d = directory, f = file, l = symlink; sizes in bytes, K/M/G = KiB/MiB/GiB):`
  if (sorted.length === 0) return `${header}\n(empty directory)`
  const lines = sorted.slice(0, LISTING_MAX_LINES).map(entryLine)
  const more = sorted.length - lines.length
  if (more > 0) lines.push(`[... ${incomplete ? 'at least ' : ''}${more} more entries]`)
  else if (incomplete) lines.push('[... more entries not listed]')
  return `${header}\n${lines.join('\n')}`
}
