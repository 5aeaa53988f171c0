/*
 * Text helpers that count Unicode code points (docs/contract.md#bash_tool: "characters are Unicode code points;
 * surrogate pairs are never split"). JavaScript strings are UTF-16, so every length and cut here
 * treats a high+low surrogate pair as one character.
 */

const SURROGATE = /[\uD800-\uDFFF]/
const isHigh = (c: number): boolean => c >= 0xd800 && c <= 0xdbff
const isLow = (c: number): boolean => c >= 0xdc00 && c <= 0xdfff

/** Number of code points in s. */
export function cpLength (s: string): number {
  if (!SURROGATE.test(s)) return s.length
  // A loop, not match(PAIR): that builds an array of every pair and pays a per-match overhead.
  let pairs = 0
  for (let i = 0; i < s.length - 1; i++) {
    if (isHigh(s.charCodeAt(i)) && isLow(s.charCodeAt(i + 1))) { pairs++; i++ }
  }
  return s.length - pairs
}

/** The first n code points of s. */
export function firstCodePoints (s: string, n: number): string {
  if (n <= 0) return ''
  if (s.length <= n) return s
  if (!SURROGATE.test(s.slice(0, n * 2))) return s.slice(0, n)
  let i = 0
  let count = 0
  while (i < s.length && count < n) {
    i += isHigh(s.charCodeAt(i)) && i + 1 < s.length && isLow(s.charCodeAt(i + 1)) ? 2 : 1
    count++
  }
  return s.slice(0, i)
}

/** The last n code points of s. */
export function lastCodePoints (s: string, n: number): string {
  if (n <= 0) return ''
  if (s.length <= n) return s
  if (!SURROGATE.test(s.slice(-n * 2))) return s.slice(-n)
  let i = s.length
  let count = 0
  while (i > 0 && count < n) {
    i -= isLow(s.charCodeAt(i - 1)) && i - 2 >= 0 && isHigh(s.charCodeAt(i - 2)) ? 2 : 1
    count++
  }
  return s.slice(i)
}

/** Cuts s to at most max code points, ending with … when cut. Looks at no more than 2·max characters of s. */
export function cutTo (s: string, max: number): string {
  // Over 2·max UTF-16 units there are more than max code points whatever the pairs: no need to count.
  if (s.length <= max || (s.length <= 2 * max && cpLength(s) <= max)) return s
  return `${firstCodePoints(s, max - 1)}…`
}

// CSI (ESC [ … final), OSC (ESC ] … BEL or ESC \), two-byte escapes, then remaining C0 controls except TAB.
// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)?|\u001b[@-Z\\-_]|[\u0000-\u0008\u000b-\u001f\u007f]/g

export function stripAnsi (s: string): string {
  return s.replace(ANSI, '')
}

/** True when s is empty or only whitespace. */
export const isBlank = (s: string): boolean => s.trim() === ''

const SHELL_SAFE = /^[A-Za-z0-9@%+=:,./_-]+$/

/** Quotes a word for a POSIX shell the way Python's shlex.quote does: bare when safe, else single-quoted. */
export function shellQuote (s: string): string {
  if (s !== '' && SHELL_SAFE.test(s)) return s
  return `'${s.replace(/'/g, "'\"'\"'")}'`
}
