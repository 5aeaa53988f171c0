/*
 * The SKILL.md front matter rules of docs/contract.md#skills, shared by the built-in index
 * (prompt-render) and the user skill store (user-skills), so both accept and refuse the same files.
 */
import { parse as parseYaml } from 'yaml'

/** A skill name and the name of its directory under /mnt/skills/<category>/. */
export const SKILL_NAME = /^[a-z0-9][a-z0-9-]{0,63}$/
/** Largest SKILL.md either reader accepts. */
export const MAX_SKILL_MD_BYTES = 256 * 1024

export type FrontMatter = { ok: true, name: string, description: string } | { ok: false, reason: string }

/** Collapses runs of whitespace (newlines of block scalars included) to one space. */
export const collapse = (s: string): string => s.replace(/\s+/g, ' ').trim()

/** Parses the front matter of a SKILL.md: `---` line, YAML, `---` line. CRLF and block scalars are accepted. */
export function parseFrontMatter (raw: string): FrontMatter {
  const text = raw.replace(/^\uFEFF/, '').replace(/\r\n?/g, '\n')
  if (!text.startsWith('---\n')) return { ok: false, reason: 'no front matter (first line must be ---)' }
  const end = text.indexOf('\n---', 3)
  if (end === -1 || !/^\n---[ \t]*(\n|$)/.test(text.slice(end, end + 8))) return { ok: false, reason: 'front matter is not closed by a --- line' }
  let data: unknown
  try { data = parseYaml(text.slice(4, end + 1)) } catch (err) {
    return { ok: false, reason: `front matter is not valid YAML: ${err instanceof Error ? err.message.split('\n')[0] : 'parse error'}` }
  }
  if (typeof data !== 'object' || data === null || Array.isArray(data)) return { ok: false, reason: 'front matter is not a mapping' }
  const { name, description } = data as Record<string, unknown>
  if (typeof name !== 'string' || !SKILL_NAME.test(name)) return { ok: false, reason: 'name missing or not ^[a-z0-9][a-z0-9-]{0,63}$' }
  if (typeof description !== 'string') return { ok: false, reason: 'description missing' }
  const oneLine = collapse(description)
  if (oneLine.length < 1 || oneLine.length > 1024) return { ok: false, reason: 'description must have 1 to 1,024 characters' }
  return { ok: true, name, description: oneLine }
}
