/*
 * The built-in skills index (docs/contract.md#skills): every <category>/<dir>/SKILL.md below the skills root,
 * parsed from its YAML front matter. The root is SKILLS_DIR, or the repository's sandbox-image/skills
 * tree, which the sandbox image copies verbatim to /mnt/skills (so the index matches the image).
 */
import { lstat, readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { FastifyBaseLogger } from 'fastify'
import { SANDBOX_SKILLS } from '../../core/chat-paths.js'
import { collapse, MAX_SKILL_MD_BYTES, parseFrontMatter, SKILL_NAME } from '../../core/skill-front-matter.js'
import type { SkillCategory, SkillEntry } from './types.js'

export { parseFrontMatter, type FrontMatter } from '../../core/skill-front-matter.js'

const MAX_SKILLS_PER_CATEGORY = 200
const ORDER: SkillCategory[] = ['user', 'public', 'examples']

export interface SkillsIndex {
  /** Every valid built-in skill, in prompt order. */
  all: SkillEntry[]
  /** Categories whose directory exists below the root (only those may be named in the prompt). */
  dirs: SkillCategory[]
}

async function isDir (path: string): Promise<boolean> {
  return await lstat(path).then(s => s.isDirectory(), () => false)
}

/** Reads the index from `root`. Invalid skills are skipped with a warn line; a missing category is fine. */
export async function loadSkillsIndex (root: string, log: FastifyBaseLogger): Promise<SkillsIndex> {
  const all: SkillEntry[] = []
  const dirs: SkillCategory[] = []
  for (const category of ORDER) {
    if (category === 'user') continue // per-user skills come from MCP_TOKENS_URL: out of scope of the built-in index
    const base = join(root, category)
    if (!await isDir(base)) continue
    dirs.push(category)
    const names = (await readdir(base)).sort().slice(0, MAX_SKILLS_PER_CATEGORY)
    for (const dir of names) {
      const entry = await readSkill(base, dir, category, log)
      if (entry !== undefined) all.push(entry)
    }
  }
  return { all: sortSkills(all), dirs }
}

async function readSkill (base: string, dir: string, category: SkillCategory, log: FastifyBaseLogger): Promise<SkillEntry | undefined> {
  if (!await isDir(join(base, dir))) return undefined
  if (!SKILL_NAME.test(dir)) {
    log.warn({ category, dir }, 'skill skipped: directory name is not ^[a-z0-9][a-z0-9-]{0,63}$')
    return undefined
  }
  const file = join(base, dir, 'SKILL.md')
  const info = await lstat(file).catch(() => undefined)
  if (info === undefined || !info.isFile() || info.size > MAX_SKILL_MD_BYTES) {
    log.warn({ category, dir }, 'skill skipped: SKILL.md missing, not a regular file or too large')
    return undefined
  }
  const parsed = parseFrontMatter(await readFile(file, 'utf8'))
  if (!parsed.ok) {
    log.warn({ category, dir, reason: parsed.reason }, 'skill skipped: invalid front matter')
    return undefined
  }
  if (parsed.name !== dir) log.warn({ category, dir, name: parsed.name }, 'skill name differs from its directory; the directory decides the location')
  return { name: parsed.name, description: parsed.description, category, location: `${SANDBOX_SKILLS}/${category}/${dir}/SKILL.md` }
}

/** user, public, examples; alphabetical by name within each. */
export function sortSkills (skills: SkillEntry[]): SkillEntry[] {
  return [...skills].sort((a, b) => ORDER.indexOf(a.category) - ORDER.indexOf(b.category) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
}

const XML: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' }
const escapeXml = (s: string): string => s.replace(/[&<>"']/g, c => XML[c] as string)
/** Cuts to `max` code points (never splitting a surrogate pair). */
export const cut = (s: string, max: number): string => { const cps = Array.from(s); return cps.length <= max ? s : cps.slice(0, max).join('') }

/** The `<available_skills>` block in the exact layout of docs/contract.md#skills. */
export function skillsBlock (skills: SkillEntry[]): string {
  const parts = skills.map(s => [
    '<skill>', '<name>', s.name, '</name>', '<description>', escapeXml(cut(collapse(s.description), 300).trimEnd()), '</description>',
    '<location>', s.location, '</location>', '</skill>', ''
  ].join('\n'))
  return ['<available_skills>', ...parts, '</available_skills>'].join('\n')
}
