import { cpLength, firstCodePoints, lastCodePoints } from './text.js'

/** What a finished capper holds: the text to show and how much was seen. */
export interface CappedOutput {
  /** Everything when nothing was dropped; else head + marker + tail. */
  text: string
  /** Code points seen in total. */
  total: number
  truncated: boolean
  /** The kept head and tail, without the marker (for the last-line progress hint and tests). */
  head: string
  tail: string
}

export interface OutputCapper {
  push (chunk: string): void
  /** The last `n` code points seen so far (n ≤ the tail budget). */
  recent (n: number): string
  readonly total: number
  finish (): CappedOutput
}

/** The marker between head and tail (docs/contract.md#bash_tool: contains `truncated`, the total, both kept counts and a hint). */
export function truncationMarker (total: number, head: number, tail: number): string {
  return `\n\n[... output truncated: ${total} characters in total, showing the first ${head} and the last ${tail}. ` +
    'To see the rest, rerun with the output redirected to a file (cmd > /tmp/out.txt 2>&1) and read parts of it ' +
    'with head, tail, grep or view ...]\n\n'
}

/**
 * Keeps the first `maxChars/2` code points, a rolling window of the last `maxChars - maxChars/2`, and the
 * total count, so a command printing gigabytes costs a bounded amount of memory (docs/contract.md#bash_tool). A lone
 * high surrogate at the end of a chunk is held back until its partner arrives, so pairs are never split.
 */
export function createOutputCapper (maxChars: number): OutputCapper {
  const headBudget = Math.floor(maxChars / 2)
  const tailBudget = maxChars - headBudget
  let head = ''
  let headCount = 0
  let tail = ''
  let tailCount = 0
  let total = 0
  let pending = ''

  const addTail = (text: string, count: number): void => {
    if (count >= tailBudget) {
      tail = lastCodePoints(text, tailBudget)
      tailCount = tailBudget
      return
    }
    tail += text
    tailCount += count
    // Trim only when the window is twice its budget: amortised O(1) per character.
    if (tailCount > tailBudget * 2) {
      tail = lastCodePoints(tail, tailBudget)
      tailCount = tailBudget
    }
  }

  const take = (text: string): void => {
    if (text === '') return
    let count = cpLength(text)
    total += count
    if (headCount < headBudget) {
      const part = firstCodePoints(text, headBudget - headCount)
      const partCount = cpLength(part)
      head += part
      headCount += partCount
      text = text.slice(part.length)
      count -= partCount
      if (text === '') return
    }
    addTail(text, count)
  }

  return {
    push (chunk) {
      let text = pending + chunk
      pending = ''
      const last = text.charCodeAt(text.length - 1)
      if (last >= 0xd800 && last <= 0xdbff) {
        pending = text.slice(-1)
        text = text.slice(0, -1)
      }
      take(text)
    },
    recent (n) {
      return lastCodePoints(tailCount > 0 ? head.slice(-n * 2) + tail : head, n)
    },
    get total () { return total + (pending === '' ? 0 : 1) },
    finish () {
      if (pending !== '') { const p = pending; pending = ''; take(p) }
      const keptTail = tailCount > tailBudget ? lastCodePoints(tail, tailBudget) : tail
      if (total <= maxChars) return { text: head + tail, total, truncated: false, head, tail }
      return { text: head + truncationMarker(total, headCount, tailBudget) + keptTail, total, truncated: true, head, tail: keptTail }
    }
  }
}
