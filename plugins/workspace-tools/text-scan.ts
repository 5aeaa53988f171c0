/*
 * Linear passes over texts of up to 16 MiB (a file that view or str_replace read), cut into slices of
 * 64K characters with a yield to the event loop between slices: the server process is shared by every
 * chat, so no single call may hold it for more than a millisecond or so at a time.
 * Every helper is O(n) in the characters it covers and allocates at most one slice's worth at once.
 */

/** Characters handled between two yields (well under a millisecond of work each). */
export const SLICE_CHARS = 1 << 16

/** Lets other requests run (timers, I/O callbacks, /health) before the next slice of work. */
export const yieldToLoop = async (): Promise<void> => { await new Promise<void>(resolve => setImmediate(resolve)) }

const isHigh = (c: number): boolean => c >= 0xd800 && c <= 0xdbff

/** End of the slice that starts at `start`, moved by one so that a surrogate pair is never cut. */
function sliceEnd (text: string, start: number, to: number): number {
  const end = Math.min(to, start + SLICE_CHARS)
  return end < to && isHigh(text.charCodeAt(end - 1)) ? end + 1 : end
}

/** Calls `each` for consecutive slices of text[from, to), yielding between them; stops when it returns true. */
export async function forEachSlice (text: string, from: number, to: number, each: (start: number, end: number) => boolean | undefined): Promise<void> {
  for (let start = from; start < to;) {
    if (start > from) await yieldToLoop()
    const end = sliceEnd(text, start, to)
    if (each(start, end) === true) return
    start = end
  }
}

/**
 * Newlines in text[s, e): indexOf while lines are long (memchr speed), a plain loop once they turn out
 * short (one indexOf call per character would cost far more). A regular expression is no option here:
 * its per-match overhead makes a file of one-character lines hundreds of times slower.
 */
function newlinesIn (text: string, s: number, e: number): number {
  const part = text.slice(s, e)
  let n = 0
  for (let i = part.indexOf('\n'); i !== -1; i = part.indexOf('\n', i + 1)) {
    n++
    if ((n & 255) === 0 && i < n * 16) {
      for (let j = i + 1; j < part.length; j++) if (part.charCodeAt(j) === 10) n++
      return n
    }
  }
  return n
}

/** Newlines in text[from, to). */
export async function countNewlines (text: string, from = 0, to = text.length): Promise<number> {
  let n = 0
  await forEachSlice(text, from, to, (s, e) => { n += newlinesIn(text, s, e); return false })
  return n
}

/** Offset just after the `k`-th newline at or after `from` (k ≥ 1), or -1 when there are fewer. */
export async function offsetAfterNewlines (text: string, from: number, k: number): Promise<number> {
  let left = k
  let found = -1
  await forEachSlice(text, from, text.length, (s, e) => {
    const here = newlinesIn(text, s, e)
    if (here < left) { left -= here; return false }
    for (let i = s; i < e; i++) {
      if (text.charCodeAt(i) === 10 && --left === 0) { found = i + 1; break }
    }
    return true
  })
  return found
}

const SURROGATE = /[\uD800-\uDFFF]/

/** Code points in text[s, e): UTF-16 units minus the surrogate pairs. */
function codePointsIn (text: string, s: number, e: number): number {
  const part = text.slice(s, e)
  if (!SURROGATE.test(part)) return part.length
  let pairs = 0
  for (let i = 0; i < part.length - 1; i++) {
    const c = part.charCodeAt(i)
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = part.charCodeAt(i + 1)
      if (d >= 0xdc00 && d <= 0xdfff) { pairs++; i++ }
    }
  }
  return part.length - pairs
}

/** Code points in text[from, to) (surrogate pairs count once). */
export async function countCodePoints (text: string, from = 0, to = text.length): Promise<number> {
  let n = 0
  await forEachSlice(text, from, to, (s, e) => { n += codePointsIn(text, s, e); return false })
  return n
}

/** True for exactly the UTF-16 code units `\s` matches. */
export function isWhitespace (c: number): boolean {
  if (c <= 0x20) return c === 0x20 || (c >= 0x09 && c <= 0x0d)
  if (c < 0xa0) return false
  return c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 ||
    c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff
}

/** The text without whitespace, and for each slice how many characters it kept (to map offsets back). */
export interface Stripped { text: string, slices: Array<{ start: number, end: number, kept: number }> }

const utf16 = new TextDecoder('utf-16le')
const ANY_WHITESPACE = /\s/

/**
 * Removes what `\s` matches, slice by slice: the kept code units are copied into a buffer and decoded
 * natively (a replace(/\s+/g) would pay its per-match overhead on every word of `a a a …`). Whitespace is
 * never a surrogate, so no pair is broken.
 */
export async function stripWhitespace (text: string): Promise<Stripped> {
  const parts: string[] = []
  const slices: Stripped['slices'] = []
  const units = new Uint16Array(Math.min(text.length, SLICE_CHARS + 1))
  await forEachSlice(text, 0, text.length, (start, end) => {
    const part = text.slice(start, end)
    // A slice without whitespace is kept as it is (a native scan instead of a loop).
    if (!ANY_WHITESPACE.test(part)) {
      parts.push(part)
      slices.push({ start, end, kept: part.length })
      return false
    }
    let kept = 0
    for (let i = start; i < end; i++) {
      const c = text.charCodeAt(i)
      if (!isWhitespace(c)) units[kept++] = c
    }
    parts.push(utf16.decode(units.subarray(0, kept)))
    slices.push({ start, end, kept })
    return false
  })
  return { text: parts.join(''), slices }
}

/** Offset in the original text of character `k` of the stripped text, or -1 when k is out of range. */
export function originalOffset (original: string, stripped: Stripped, k: number): number {
  let left = k
  for (const { start, end, kept } of stripped.slices) {
    if (left >= kept) { left -= kept; continue }
    for (let i = start; i < end; i++) {
      if (isWhitespace(original.charCodeAt(i))) continue
      if (left-- === 0) return i
    }
  }
  return -1
}
