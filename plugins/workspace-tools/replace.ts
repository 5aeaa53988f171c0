import { numberLine, splitLines } from './view-text.js'
import { cutTo } from './text.js'

/*
 * The text logic of str_replace (surface.md §3.6). Checks run in the spec's order; the sandbox I/O
 * around them lives in str-replace-tool.ts.
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

export const lineAt = (text: string, index: number): number => {
  let line = 1
  for (let i = text.indexOf('\n'); i !== -1 && i < index; i = text.indexOf('\n', i + 1)) line++
  return line
}

/** Start indexes of the non-overlapping occurrences of needle, at most `limit`. */
export function occurrences (text: string, needle: string, limit = 1000): number[] {
  const found: number[] = []
  for (let i = text.indexOf(needle); i !== -1 && found.length < limit; i = text.indexOf(needle, i + needle.length)) found.push(i)
  return found
}

const WS_HINT_MAX_TEXT = 4 * 1024 * 1024
const WS_HINT_MAX_NEEDLE = 2000

/** Line of a match that differs from needle only in whitespace, or undefined. */
export function whitespaceInsensitiveLine (text: string, needle: string): number | undefined {
  const chars = Array.from(needle.replace(/\s+/g, ''))
  if (chars.length === 0 || chars.length > WS_HINT_MAX_NEEDLE || text.length > WS_HINT_MAX_TEXT) return undefined
  const pattern = chars.map(c => c.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('\\s*')
  const match = new RegExp(pattern).exec(text)
  return match === null ? undefined : lineAt(text, match.index)
}

/** Up to `context` lines around the edited region, numbered with the real line numbers. */
export function editSnippet (text: string, firstLine: number, lastLine: number, context = 4, maxLines = 40): string {
  const lines = splitLines(text)
  const from = Math.max(1, firstLine - context)
  const to = Math.min(lines.length, lastLine + context, from + maxLines - 1)
  const out: string[] = []
  for (let n = from; n <= to; n++) out.push(numberLine(n, cutTo(lines[n - 1] as string, 500)))
  return out.join('\n')
}

export type ReplaceOutcome = { ok: true, text: string, snippet: string, line: number } | { ok: false, error: string }

/** Replaces the single occurrence of oldStr, or explains why it cannot (0 or N ≥ 2 occurrences). */
export function replaceOnce (text: string, oldStr: string, newStr: string, path: string): ReplaceOutcome {
  const found = occurrences(text, oldStr)
  if (found.length === 0) {
    const near = whitespaceInsensitiveLine(text, oldStr)
    const hint = near !== undefined
      ? ` Text that matches except for whitespace (spaces, tabs, line breaks or indentation) starts at line ${near}; ` +
        'view that part of the file and copy it exactly.'
      : ' It must match the file character for character, including whitespace and indentation; view the file to copy the exact text.'
    return { ok: false, error: `Error: old_str not found in ${path}.${hint}` }
  }
  if (found.length >= 2) {
    const lines = found.slice(0, 10).map(i => lineAt(text, i))
    const more = found.length > 10 ? ', …' : ''
    return {
      ok: false,
      error: `Error: Found ${found.length} occurrences of old_str in ${path} (at lines ${lines.join(', ')}${more}). ` +
        'Include more surrounding context in old_str so that it matches exactly once.'
    }
  }
  const at = found[0] as number
  const result = text.slice(0, at) + newStr + text.slice(at + oldStr.length)
  const line = lineAt(text, at)
  const newLines = newStr.split('\n').length - 1
  return { ok: true, text: result, line, snippet: result === '' ? '[Empty file]' : editSnippet(result, line, line + newLines) }
}
