/*
 * Substring search in guaranteed linear time, for text and needles the agent controls (str_replace runs
 * it over up to 16 MiB in the server process, which every chat shares).
 *
 * V8's String.prototype.indexOf is a Boyer-Moore variant whose shift tables cover only the last 250
 * characters of the needle: for a longer needle whose mismatch sits before those 250 (`a`×k + `b` + `a`×k
 * over a file of `a`) every alignment re-compares the whole prefix and the search is O(n·m) — measured
 * 5 s for a 2,000-character needle over 4 MiB and a minute for 20,000. Up to 250 characters its full
 * Boyer-Moore is linear, and much faster than anything in JavaScript, so short needles keep using it.
 * Longer needles use the Two-Way algorithm (Crochemore–Perrin, as glibc's memmem): at most 2n character
 * comparisons, O(1) extra space, with a bad-character shift on the needle's last character so that
 * ordinary text is skipped needle-length at a time.
 */

import { SLICE_CHARS, yieldToLoop } from './text-scan.js'

/** Longest needle handed to the engine's indexOf (V8's Boyer-Moore tables cover this many characters). */
export const NATIVE_MAX_NEEDLE = 250

export interface Searcher {
  /** Index of the first occurrence that starts in [from, until] (until defaults to the end), or -1. */
  find (haystack: string, from: number, until?: number): number
}

/** Start of the maximal suffix of `x` (for `<`, or for `>` when `reverse`) and its period. */
function maximalSuffix (x: string, reverse: boolean): { start: number, period: number } {
  let ms = -1
  let j = 0
  let k = 1
  let p = 1
  while (j + k < x.length) {
    const a = x.charCodeAt(j + k)
    const b = x.charCodeAt(ms + k)
    if (reverse ? a > b : a < b) {
      j += k
      k = 1
      p = j - ms
    } else if (a === b) {
      if (k !== p) k++
      else { j += p; k = 1 }
    } else {
      ms = j
      j = ms + 1
      k = p = 1
    }
  }
  return { start: ms, period: p }
}

/** Distance from the last occurrence of each low byte to the needle's end (a safe Horspool shift). */
function shiftTable (x: string): Int32Array {
  const table = new Int32Array(256).fill(x.length)
  for (let i = 0; i < x.length; i++) table[x.charCodeAt(i) & 0xff] = x.length - 1 - i
  return table
}

/** The Two-Way searcher for any non-empty needle (createSearcher picks it for long needles). */
export function twoWaySearcher (x: string): Searcher {
  const m = x.length
  const s1 = maximalSuffix(x, false)
  const s2 = maximalSuffix(x, true)
  // The critical factorisation x = x[0..ell] · x[ell+1..m-1].
  const { start: ell, period: p } = s1.start > s2.start ? s1 : s2
  let periodic = ell + p < m
  for (let i = 0; periodic && i <= ell; i++) if (x.charCodeAt(i) !== x.charCodeAt(i + p)) periodic = false
  const per = periodic ? p : Math.max(ell + 1, m - ell - 1) + 1
  const shift = shiftTable(x)
  return {
    find (y, from, until = Number.POSITIVE_INFINITY) {
      const last = Math.min(y.length - m, until)
      let j = Math.max(0, from)
      // Periodic needles remember how much of the right half already matched (indexes ≤ memory).
      let memory = -1
      while (j <= last) {
        const skip = shift[y.charCodeAt(j + m - 1) & 0xff] as number
        if (skip > 0) {
          j += memory >= 0 && skip < per ? m - per : skip
          memory = -1
          continue
        }
        // The shift table hashes characters, so the last one is compared again here.
        let i = Math.max(ell, memory) + 1
        while (i < m && x.charCodeAt(i) === y.charCodeAt(i + j)) i++
        if (i < m) {
          j += i - ell
          memory = -1
          continue
        }
        i = ell
        while (i > memory && x.charCodeAt(i) === y.charCodeAt(i + j)) i--
        if (i <= memory) return j
        j += per
        memory = periodic ? m - per - 1 : -1
      }
      return -1
    }
  }
}

/** A searcher for `needle` (non-empty), prepared once and reusable over many haystacks and starts. */
export function createSearcher (needle: string): Searcher {
  if (needle.length <= NATIVE_MAX_NEEDLE) return { find: (haystack, from, until) => nativeFind(haystack, needle, from, until) }
  return twoWaySearcher(needle)
}

function nativeFind (haystack: string, needle: string, from: number, until?: number): number {
  if (until === undefined || until >= haystack.length - needle.length) return haystack.indexOf(needle, from)
  if (until < from) return -1
  // A slice of a flat string is a view (no copy); it ends where the last allowed alignment's match would.
  const at = haystack.slice(from, until + needle.length).indexOf(needle)
  return at === -1 ? -1 : from + at
}

/**
 * First occurrence at or after `from`, searched in slices of alignments with a yield to the event loop
 * between them. A slice costs O(its alignments + needle length), so slices are never shorter than the
 * needle: the total stays linear for any needle, and a slice stays small for ordinary ones.
 */
export async function findYielding (searcher: Searcher, text: string, needleLength: number, from: number): Promise<number> {
  const slice = Math.max(SLICE_CHARS, needleLength)
  for (let start = from; start <= text.length - needleLength; start += slice) {
    if (start > from) await yieldToLoop()
    const at = searcher.find(text, start, start + slice - 1)
    if (at !== -1) return at
  }
  return -1
}

/** Start indexes of the non-overlapping occurrences of needle, at most `limit`; O(text + needle) in total. */
export async function occurrences (text: string, needle: string, limit = 1000): Promise<number[]> {
  const found: number[] = []
  if (needle.length === 0 || needle.length > text.length) return found
  const searcher = createSearcher(needle)
  for (let i = await findYielding(searcher, text, needle.length, 0); i !== -1 && found.length < limit;
    i = await findYielding(searcher, text, needle.length, i + needle.length)) found.push(i)
  return found
}
