import type { ReadResourceResult, Resource } from '@modelcontextprotocol/server'
import { SANDBOX_SKILLS } from '../../core/chat-paths.js'
import { SKILL_NAME } from '../../core/skill-front-matter.js'
import type { ChatRequestContext, ResourceProvider } from '../mcp-transport/types.js'
import type { PromptService, SkillCategory, SkillsRequest } from '../prompt-render/types.js'
import type { SkillWatchers } from './skill-watchers.js'

/*
 * Skills as MCP resources (docs/contract.md#skills; beyond the reference): every skill offered to the request's user
 * (the same list as the prompt: user skills, public, examples) as `skill://<category>/<name>`, whose
 * contents are its SKILL.md. MCP-native clients can show and attach them without a shell round trip.
 * A skill the user is not offered is "not ours" (undefined → -32602 with data.uri), like another chat's upload.
 */
const PREFIX = 'skill://'
const CATEGORIES: readonly SkillCategory[] = ['user', 'public', 'examples']

export const skillUri = (category: SkillCategory, name: string): string => `${PREFIX}${category}/${name}`

/** The SKILL.md location of a skill URI, or undefined when it is not one (strict: category and name rules). */
export function parseSkillUri (uri: string): string | undefined {
  if (!uri.startsWith(PREFIX)) return undefined
  const [category, name, ...rest] = uri.slice(PREFIX.length).split('/')
  if (rest.length > 0 || category === undefined || name === undefined) return undefined
  if (!CATEGORIES.includes(category as SkillCategory) || !SKILL_NAME.test(name)) return undefined
  return `${SANDBOX_SKILLS}/${category}/${name}/SKILL.md`
}

const who = (ctx: ChatRequestContext): SkillsRequest => ({
  ...(ctx.user.email !== undefined && { email: ctx.user.email }),
  ...(ctx.user.credentials !== undefined && { credentials: ctx.user.credentials })
})

/** `watchers` learns which chats of a user look at skills, for notifications/resources/list_changed. */
export function createSkillResources (prompts: PromptService, watchers?: SkillWatchers): ResourceProvider {
  const seen = (ctx: ChatRequestContext): void => { if (ctx.user.email !== undefined) watchers?.remember(ctx.user.email, ctx.chatId) }
  return {
    async list (ctx): Promise<Resource[]> {
      seen(ctx)
      const skills = await prompts.skills(who(ctx))
      return skills.map(s => ({
        uri: skillUri(s.category, s.name),
        name: `${s.category}/${s.name}`,
        title: `Skill: ${s.name}`,
        mimeType: 'text/markdown',
        description: `${s.description} (SKILL.md, also at ${s.location})`
      }))
    },

    async read (uri, ctx): Promise<ReadResourceResult['contents'] | undefined> {
      const location = parseSkillUri(uri)
      if (location === undefined) return undefined
      seen(ctx)
      const text = await prompts.readSkill(location, who(ctx))
      return text === undefined ? undefined : [{ uri, mimeType: 'text/markdown', text }]
    }
  }
}
