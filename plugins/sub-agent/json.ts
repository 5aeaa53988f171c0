/** Type guards for JSON from the sandbox (CLI events, session stores): nothing is trusted unchecked. */

export type Json = Record<string, unknown>
export const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)
/** A non-empty string, else undefined. */
export const str = (v: unknown): string | undefined => typeof v === 'string' && v !== '' ? v : undefined
/** A finite number > 0, else undefined (a reported 0 counts as unknown, docs/contract.md#sub-agent-result). */
export const positive = (v: unknown): number | undefined => typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : undefined

/** Session ids accepted from a CLI and as resume_session_id (no spaces, quotes or path separators). */
export const SESSION_ID = /^[A-Za-z0-9_.:-]{1,128}$/
export const sessionId = (v: unknown): string | undefined => typeof v === 'string' && SESSION_ID.test(v) ? v : undefined

/** The text of message content: a string, or the text parts of an array of blocks. */
export function contentText (content: unknown): string | undefined {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return undefined
  const parts: string[] = []
  for (const part of content) {
    if (isObject(part) && typeof part.text === 'string' && (part.type === 'text' || part.type === 'input_text' || part.type === 'output_text')) parts.push(part.text)
  }
  return parts.length > 0 ? parts.join('\n') : undefined
}
