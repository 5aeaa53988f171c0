import { numberLine } from './view-text.js'
import { cutTo } from './text.js'
import { countNewlines, offsetAfterNewlines, originalOffset, stripWhitespace } from './text-scan.js'
import { createSearcher, findYielding, occurrences } from './text-search.js'

/*
 * The text logic of str_replace (docs/contract.md#str_replace). Checks run in the contract's order; the sandbox I/O
 * around them lives in str-replace-tool.ts. The file (≤ 16 MiB) and old_str (≤ the request body) are
 * agent-controlled: every pass here is linear and yields to the event loop between slices
 * (text-scan.ts), and no regular expression is built from either of them.
 */

/** The two checks that need no file (and are made before Docker is touched). */
export function checkReplaceArgs (oldStr: string, newStr: string): string | undefined {
  if (oldStr === newStr) return 'Error: old_str and new_str are identical; nothing to replace'
  if (oldStr === '') return 'Error: old_str must not be empty; give the exact text to replace (use create_file to write a whole file)'
  return undefined
}

const fatalUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/** The file as text, or undefined when it is binary (NUL byte) or not valid UTF-8. */
export function decodeEditable (content: Buffer): string | undefined {
  if (content.includes(0)) return undefined
  try { return fatalUtf8.decode(content) } catch { return undefined }
}

/** 1-based line numbers of the ascending offsets, in one pass over the text. */
export async function linesAt (text: string, offsets: number[]): Promise<number[]> {
  const lines: number[] = []
  let line = 1
  let at = 0
  for (const offset of offsets) {
    line += await countNewlines(text, at, offset)
    at = offset
    lines.push(line)
  }
  return lines
}

export { occurrences }

/**
 * Line of a match that differs from needle only in whitespace (what `\s` matches), or undefined: the
 * needle and the text without whitespace, searched in linear time, the hit mapped back to its offset.
 */
export async function whitespaceInsensitiveLine (text: string, needle: string): Promise<number | undefined> {
  const core = (await stripWhitespace(needle)).text
  if (core === '' || core.length > text.length) return undefined
  const stripped = await stripWhitespace(text)
  // Neither has whitespace: the exact search that just failed was this very search.
  if (core.length === needle.length && stripped.text.length === text.length) return undefined
  const k = await findYielding(createSearcher(core), stripped.text, core.length, 0)
  if (k === -1) return undefined
  const [line] = await linesAt(text, [originalOffset(text, stripped, k)])
  return line
}

/** Lines firstLine-context … lastLine+context (at most maxLines), numbered with the real line numbers. */
export async function editSnippet (text: string, firstLine: number, lastLine: number, context = 4, maxLines = 40): Promise<string> {
  const from = Math.max(1, firstLine - context)
  const to = Math.min(lastLine + context, from + maxLines - 1)
  let start = from === 1 ? 0 : await offsetAfterNewlines(text, 0, from - 1)
  const out: string[] = []
  // A final newline ends the last line; it does not start another.
  for (let n = from; n <= to && start !== -1 && start < text.length; n++) {
    const nl = text.indexOf('\n', start)
    out.push(numberLine(n, cutTo(text.slice(start, nl === -1 ? text.length : nl), 500)))
    start = nl === -1 ? -1 : nl + 1
  }
  return out.join('\n')
}

export type ReplaceOutcome = { ok: true, text: string, snippet: string, line: number } | { ok: false, error: string }

/** Replaces the single occurrence of oldStr, or explains why it cannot (0 or N ≥ 2 occurrences). */
export async function replaceOnce (text: string, oldStr: string, newStr: string, path: string): Promise<ReplaceOutcome> {
  const found = await occurrences(text, oldStr)
  if (found.length === 0) {
    const near = await whitespaceInsensitiveLine(text, oldStr)
    const hint = near !== undefined
      ? ` Text that matches except for whitespace (spaces, tabs, line breaks or indentation) starts at line ${near}; ` +
        'view that part of the file and copy it exactly.'
      : ' It must match the file character for character, including whitespace and indentation; view the file to copy the exact text.'
    return { ok: false, error: `Error: old_str not found in ${path}.${hint}` }
  }
  if (found.length >= 2) {
    const lines = await linesAt(text, found.slice(0, 10))
    const more = found.length > 10 ? ', …' : ''
    return {
      ok: false,
      error: `Error: Found ${found.length} occurrences of old_str in ${path} (at lines ${lines.join(', ')}${more}). ` +
        'Include more surrounding context in old_str so that it matches exactly once.'
    }
  }
  const at = found[0] as number
  const result = text.slice(0, at) + newStr + text.slice(at + oldStr.length)
  const [line] = await linesAt(text, [at]) as [number]
  const newLines = await countNewlines(newStr)
  return { ok: true, text: result, line, snippet: result === '' ? '[Empty file]' : await editSnippet(result, line, line + newLines) }
}
