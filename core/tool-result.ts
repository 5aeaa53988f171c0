import type { CallToolResult } from '@modelcontextprotocol/server'

/** Longest tool error text, in code points (a longer one is cut and ends with `…`). */
export const MAX_TOOL_ERROR_CHARS = 2000

/**
 * The one shape of an MCP tool error (the tool ran and failed): `isError` with one text block beginning
 * `Error:`, which tells the model what to do next. Every plugin's tools answer their failures with it.
 */
export function errorResult (text: string): CallToolResult {
  const body = text.startsWith('Error:') ? text : `Error: ${text}`
  return { isError: true, content: [{ type: 'text', text: cutTo(body, MAX_TOOL_ERROR_CHARS) }] }
}

/** At most `max` code points (never half a surrogate pair): the first `max - 1` and `…` when cut. */
function cutTo (text: string, max: number): string {
  if (text.length <= max) return text
  let units = 0
  let points = 0
  for (const cp of text) {
    if (points === max - 1) break
    units += cp.length
    points++
  }
  // At most one code point left: the text has at most `max` and fits.
  const next = text.codePointAt(units)
  const fits = next === undefined || String.fromCodePoint(next).length === text.length - units
  return fits ? text : `${text.slice(0, units)}…`
}
