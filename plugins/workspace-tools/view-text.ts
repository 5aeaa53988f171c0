import { cpLength, firstCodePoints } from './text.js'

/*
 * Text rendering of `view` (surface.md §3.4): cat -n style numbering with real line numbers, view_range
 * validation, and head/tail truncation cut at line boundaries.
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

/** What the truncation marker reports about the whole file. */
export interface FileFacts { bytes: number, lineCount: number }

interface Fitted { text: string, count: number }

/** As many whole numbered lines from the start as fit in budget; a too-long first line is cut instead. */
function fitFromStart (block: LineBlock, budget: number): Fitted {
  const parts: string[] = []
  let used = 0
  for (let i = 0; i < block.lines.length; i++) {
    const rendered = numberLine(block.first + i, block.lines[i] as string)
    const len = cpLength(rendered) + (i === 0 ? 0 : 1)
    if (used + len > budget) break
    parts.push(rendered)
    used += len
  }
  if (parts.length === 0 && block.lines.length > 0) {
    return { text: `${firstCodePoints(numberLine(block.first, block.lines[0] as string), budget - 2)} …`, count: 1 }
  }
  return { text: parts.join('\n'), count: parts.length }
}

/** As many whole numbered lines from the end as fit in budget; a too-long last line is cut instead. */
function fitFromEnd (block: LineBlock, budget: number, notBefore: number): Fitted {
  const parts: string[] = []
  let used = 0
  for (let i = block.lines.length - 1; i >= 0 && block.first + i >= notBefore; i--) {
    const rendered = numberLine(block.first + i, block.lines[i] as string)
    const len = cpLength(rendered) + (parts.length === 0 ? 0 : 1)
    if (used + len > budget) break
    parts.unshift(rendered)
    used += len
  }
  const lastIndex = block.lines.length - 1
  if (parts.length === 0 && lastIndex >= 0 && block.first + lastIndex >= notBefore) {
    return { text: `${firstCodePoints(numberLine(block.first + lastIndex, block.lines[lastIndex] as string), budget - 2)} …`, count: 1 }
  }
  return { text: parts.join('\n'), count: parts.length }
}

function renderedLength (block: LineBlock): number {
  let total = 0
  for (let i = 0; i < block.lines.length; i++) total += cpLength(numberLine(block.first + i, block.lines[i] as string)) + 1
  return Math.max(0, total - 1)
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
export function renderNumbered (block: LineBlock, facts: FileFacts, maxChars: number, tailBlock?: LineBlock): string {
  const headBudget = Math.floor(maxChars / 2)
  const tailBudget = maxChars - headBudget
  if (tailBlock === undefined) {
    const chars = renderedLength(block)
    if (chars <= maxChars) return block.lines.map((l, i) => numberLine(block.first + i, l)).join('\n')
    const head = fitFromStart(block, headBudget)
    const tail = fitFromEnd(block, tailBudget, block.first + head.count)
    const lastLine = block.first + block.lines.length - 1
    const shown: [number, number, number, number] = [block.first, block.first + head.count - 1, lastLine - tail.count + 1, lastLine]
    return head.text + fileTruncatedMarker(facts, shown, chars) + tail.text
  }
  const head = fitFromStart(block, headBudget)
  const tail = fitFromEnd(tailBlock, tailBudget, block.first + head.count)
  const lastLine = tailBlock.first + tailBlock.lines.length - 1
  const shown: [number, number, number, number] = [block.first, block.first + head.count - 1, lastLine - tail.count + 1, lastLine]
  return head.text + fileTruncatedMarker(facts, shown) + tail.text
}

/** The whole text view of a file read completely: `[Empty file]`, a range error, or numbered lines. */
export function viewText (text: string, bytes: number, range: ViewRange | null, maxChars: number): { text: string } | { error: string } {
  const lines = splitLines(text)
  if (lines.length === 0) return { text: '[Empty file]' }
  const facts = { bytes, lineCount: lines.length }
  if (range === null) return { text: renderNumbered({ first: 1, lines }, facts, maxChars) }
  const bad = checkRange(range)
  if (bad !== undefined) return { error: bad }
  const [start, end] = range
  if (start > lines.length) return { error: rangeBeyondEnd(range, lines.length) }
  const stop = end === -1 ? lines.length : Math.min(end, lines.length)
  return { text: renderNumbered({ first: start, lines: lines.slice(start - 1, stop) }, facts, maxChars) }
}
