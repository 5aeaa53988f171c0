import { SANDBOX_SKILLS } from '../../core/chat-paths.js'
import { SKILL_NAME } from '../../core/skill-front-matter.js'
import type { McpRequestContext } from '../mcp-transport/types.js'
import type { PromptService, SkillCategory, SkillEntry, SkillsRequest } from '../prompt-render/types.js'
import type { ManifestCache, SkillManifest } from './skill-manifest.js'

/*
 * The skills offered to the caller (docs/contract.md#skills: user skills, public, examples; the same list as the
 * prompt) with their SEP-2640 manifests, and the one parser of skill:// URIs. A skill the caller is not
 * offered does not exist for it: another user's skill is never found, listed or hashed for this caller.
 */
export const CATEGORIES: readonly SkillCategory[] = ['user', 'public', 'examples']
/** Longest skill:// URI looked at; longer ones are not ours (a file path is at most 1,024 bytes). */
const MAX_URI_LENGTH = 4096

export interface OfferedSkill { skill: SkillEntry, manifest: SkillManifest | undefined }

/** Where a skill:// URI points: its skill, and the canonical (WHATWG-serialised) URI. */
export interface SkillUri { category: SkillCategory, name: string, canonical: string }

/** Splits `skill://<category>/<name>[/<path>]`; undefined for anything else (strict: category and name rules, no query or fragment). */
export function parseSkillUri (uri: string): SkillUri | undefined {
  if (typeof uri !== 'string' || uri.length > MAX_URI_LENGTH || !uri.startsWith('skill://')) return undefined
  let url: URL
  try { url = new URL(uri) } catch { return undefined }
  if (url.search !== '' || url.hash !== '' || url.username !== '' || url.port !== '') return undefined
  const category = url.host as SkillCategory
  const name = url.pathname.split('/')[1] ?? ''
  if (!CATEGORIES.includes(category) || !SKILL_NAME.test(name)) return undefined
  return { category, name, canonical: url.href }
}

/** The skill's directory name under its category (the last folder of its location). */
export const dirOf = (skill: SkillEntry): string => skill.location.split('/').at(-2) ?? skill.name

export const locationOf = (category: SkillCategory, name: string): string => `${SANDBOX_SKILLS}/${category}/${name}/SKILL.md`

export const who = (ctx: McpRequestContext): SkillsRequest => ({
  ...(ctx.user.email !== undefined && { email: ctx.user.email }),
  ...(ctx.user.credentials !== undefined && { credentials: ctx.user.credentials })
})

export interface SkillCatalog {
  /** Every skill offered to the caller, in prompt order, with its manifest when it can be served through the extension. */
  offered (ctx: McpRequestContext): Promise<OfferedSkill[]>
  /** The manifest of the skill `uri` points into, when that skill is offered to the caller and servable. */
  manifestOf (uri: SkillUri, ctx: McpRequestContext): Promise<SkillManifest | undefined>
}

export function createSkillCatalog (prompts: PromptService, manifests: ManifestCache): SkillCatalog {
  const manifest = async (folders: ReadonlyMap<string, string>, category: SkillCategory, name: string): Promise<SkillManifest | undefined> => {
    const folder = folders.get(locationOf(category, name))
    return folder === undefined ? undefined : await manifests.get(`${category}/${name}`, folder)
  }
  return {
    async offered (ctx) {
      const { skills, folders } = await prompts.skillFolders(who(ctx))
      const out: OfferedSkill[] = []
      // The location's directory is authoritative (docs/contract.md#skills): a front matter name that differs
      // from it makes skillEntry refuse the skill, so it is served as a resource only.
      for (const skill of skills) out.push({ skill, manifest: await manifest(folders, skill.category, dirOf(skill)) })
      return out
    },
    manifestOf: async (uri, ctx) => await manifest((await prompts.skillFolders(who(ctx))).folders, uri.category, uri.name)
  }
}
