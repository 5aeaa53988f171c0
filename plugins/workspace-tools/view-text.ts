import { cpLength, firstCodePoints } from './text.js'
import { countCodePoints, countNewlines, offsetAfterNewlines } from './text-scan.js'

/*
 * Text rendering of `view` (docs/contract.md#view): cat -n style numbering with real line numbers, view_range
 * validation, and head/tail truncation cut at line boundaries. A file of up to 16 MiB is never split into
 * an array of lines: lines are counted and located with linear, yielding scans (text-scan.ts), and only
 * the lines that are shown are cut out of the text.
 */

/** Lines of a text; a final newline ends the last line rather than starting an empty one. */
export function splitLines (text: string): string[] {
  if (text === '') return []
  const lines = text.split('\n')
  if (lines[lines.length - 1] === '') lines.pop()
  return lines
}

/** Line number right-aligned to width 6, a TAB, the line (cat -n). */
export function numberLine (n: number, line: string): string {
  return `${String(n).padStart(6)}\t${line}`
}

export type ViewRange = [number, number]

/** Checks S ≥ 1 and E = -1 or E ≥ S; returns the error text or undefined. */
export function checkRange ([start, end]: ViewRange): string | undefined {
  const prefix = `Error: invalid view_range [${start}, ${end}]:`
  if (!Number.isInteger(start) || !Number.isInteger(end)) return `${prefix} both values must be integers`
  if (start < 1) return `${prefix} the start line must be 1 or greater (lines are numbered from 1)`
  if (end !== -1 && end < start) return `${prefix} the end line must be -1 (end of file) or at least the start line`
  return undefined
}

export function rangeBeyondEnd ([start, end]: ViewRange, lineCount: number): string {
  return `Error: invalid view_range [${start}, ${end}]: the start line ${start} is beyond the end of the file, ` +
    `which has ${lineCount} line${lineCount === 1 ? '' : 's'}`
}

/** A run of consecutive lines and the number of the first. */
export interface LineBlock { first: number, lines: string[] }

/** The same kept as one text: `count` lines joined by `\n` (no final newline); count 0 means no lines. */
export interface TextBlock { first: number, text: string, count: number }

/** The lines of `text` (a final newline ends the last line, as in splitLines), the first numbered `first`. */
export async function textBlock (text: string, first: number): Promise<TextBlock> {
  if (text === '') return { first, text, count: 0 }
  const body = text.endsWith('\n') ? text.slice(0, -1) : text
  return { first, text: body, count: await countNewlines(body) + 1 }
}

/** Lines start..stop (1-based, inclusive, 1 ≤ start ≤ stop ≤ block.count) of a block that starts at line 1. */
async function subBlock (block: TextBlock, start: number, stop: number): Promise<TextBlock> {
  const from = start === 1 ? 0 : await offsetAfterNewlines(block.text, 0, start - 1)
  const after = stop === block.count ? -1 : await offsetAfterNewlines(block.text, from, stop - start + 1)
  return { first: start, text: block.text.slice(from, after === -1 ? block.text.length : after - 1), count: stop - start + 1 }
}

const asText = (b: LineBlock | TextBlock): TextBlock => 'lines' in b ? { first: b.first, text: b.lines.join('\n'), count: b.lines.length } : b

/** What the truncation marker reports about the whole file. */
export interface FileFacts { bytes: number, lineCount: number }

interface Fitted { text: string, count: number }

/** Characters of numberLine(n, ''): the number padded to 6 and the TAB. */
const prefixWidth = (n: number): number => Math.max(6, String(n).length) + 1

/** Σ prefixWidth(n) for n = a … b, by runs of equal digit count. */
function prefixSum (a: number, b: number): number {
  let total = 0
  for (let digits = 1, lo = 1; lo <= b; digits++, lo *= 10) {
    const from = Math.max(a, lo)
    const to = Math.min(b, lo * 10 - 1)
    if (from <= to) total += (to - from + 1) * (Math.max(6, digits) + 1)
  }
  return total
}

/** Code points of the rendered line n, or budget + 1 when it certainly does not fit (long lines are not counted). */
const fitLength = (n: number, line: string, budget: number): number =>
  line.length > 2 * budget ? budget + 1 : prefixWidth(n) + cpLength(line)

/** A single numbered line cut to budget code points with ` …`, reading only the start of the line. */
const cutLine = (n: number, line: string, budget: number): string =>
  `${firstCodePoints(numberLine(n, firstCodePoints(line, budget)), budget - 2)} …`

/** As many whole numbered lines from the start as fit in budget; a too-long first line is cut instead. */
function fitFromStart (block: TextBlock, budget: number): Fitted {
  const parts: string[] = []
  let used = 0
  for (let i = 0, start = 0; i < block.count; i++) {
    const nl = block.text.indexOf('\n', start)
    const line = block.text.slice(start, nl === -1 ? block.text.length : nl)
    const len = fitLength(block.first + i, line, budget) + (i === 0 ? 0 : 1)
    if (used + len > budget) {
      if (i === 0) return { text: cutLine(block.first, line, budget), count: 1 }
      break
    }
    parts.push(numberLine(block.first + i, line))
    used += len
    start = nl + 1
  }
  return { text: parts.join('\n'), count: parts.length }
}

/** As many whole numbered lines from the end as fit in budget; a too-long last line is cut instead. */
function fitFromEnd (block: TextBlock, budget: number, notBefore: number): Fitted {
  const parts: string[] = []
  let used = 0
  for (let i = block.count - 1, end = block.text.length; i >= 0 && block.first + i >= notBefore; i--) {
    const nl = i === 0 ? -1 : block.text.lastIndexOf('\n', end - 1)
    const line = block.text.slice(nl + 1, end)
    const len = fitLength(block.first + i, line, budget) + (parts.length === 0 ? 0 : 1)
    if (used + len > budget) {
      if (parts.length === 0) return { text: cutLine(block.first + i, line, budget), count: 1 }
      break
    }
    parts.unshift(numberLine(block.first + i, line))
    used += len
    end = nl
  }
  return { text: parts.join('\n'), count: parts.length }
}

export function fileTruncatedMarker (facts: FileFacts, shown: [number, number, number, number], chars?: number): string {
  const [a, b, c, d] = shown
  const size = `${facts.bytes} bytes, ${facts.lineCount} lines${chars === undefined ? '' : `, ${chars} characters with line numbers`}`
  const which = c > d ? `line${a === b ? ` ${a}` : `s ${a}–${b}`}` : `lines ${a}–${b} and ${c}–${d}`
  const advice = c - 1 >= b + 1
    ? `Use view_range to read the lines in between, e.g. view_range [${b + 1}, ${Math.min(c - 1, b + 400)}]`
    : 'Use view_range to read single lines'
  return `\n[... File truncated (${size}): showing ${which}. ${advice}; ` +
    'read very long lines in pieces with bash, e.g. cut -c 1-2000 ...]\n'
}

/**
 * Renders numbered lines; above maxChars, the first half and the last half of the budget cut at line
 * boundaries with a marker between them. `tailBlock` is given when the end of a huge file was read
 * separately (its lines follow an unread gap).
 */
export async function renderNumbered (lines: LineBlock | TextBlock, facts: FileFacts, maxChars: number, tailLines?: LineBlock | TextBlock): Promise<string> {
  const block = asText(lines)
  const headBudget = Math.floor(maxChars / 2)
  const tailBudget = maxChars - headBudget
  const tail = tailLines === undefined ? block : asText(tailLines)
  let chars: number | undefined
  if (tailLines === undefined) {
    chars = block.count === 0 ? 0 : prefixSum(block.first, block.first + block.count - 1) + await countCodePoints(block.text)
    // Within the budget every line has at least 7 characters, so this split is bounded by maxChars.
    if (chars <= maxChars) return block.count === 0 ? '' : block.text.split('\n').map((l, i) => numberLine(block.first + i, l)).join('\n')
  }
  const head = fitFromStart(block, headBudget)
  const end = fitFromEnd(tail, tailBudget, block.first + head.count)
  const lastLine = tail.first + tail.count - 1
  const shown: [number, number, number, number] = [block.first, block.first + head.count - 1, lastLine - end.count + 1, lastLine]
  return head.text + fileTruncatedMarker(facts, shown, chars) + end.text
}

/** The whole text view of a file read completely: `[Empty file]`, a range error, or numbered lines. */
export async function viewText (text: string, bytes: number, range: ViewRange | null, maxChars: number): Promise<{ text: string } | { error: string }> {
  const all = await textBlock(text, 1)
  if (all.count === 0) return { text: '[Empty file]' }
  const facts = { bytes, lineCount: all.count }
  if (range === null) return { text: await renderNumbered(all, facts, maxChars) }
  const bad = checkRange(range)
  if (bad !== undefined) return { error: bad }
  const [start, end] = range
  if (start > all.count) return { error: rangeBeyondEnd(range, all.count) }
  const stop = end === -1 ? all.count : Math.min(end, all.count)
  return { text: await renderNumbered(await subBlock(all, start, stop), facts, maxChars) }
}
