import type { RequestCredentials } from '../../core/identity.js'

/** Where a skill comes from; also its folder under /mnt/skills. `user` skills come from the user-skills plugin (docs/contract.md#skills). */
export type SkillCategory = 'user' | 'public' | 'examples'

/** One skill of the index, read from the front matter of its SKILL.md (docs/contract.md#skills). */
export interface SkillEntry {
  /** The front matter `name` (^[a-z0-9][a-z0-9-]{0,63}$). */
  name: string
  /** The front matter `description`, collapsed to one line (1–1,024 chars). */
  description: string
  category: SkillCategory
  /** Path inside the sandbox: `/mnt/skills/<category>/<directory>/SKILL.md` (the directory is authoritative). */
  location: string
}

export interface RenderRequest {
  /** A validated chat id; absent → the legacy template with `{file_base_url}`, `{archive_url}`, `{chat_id}`. */
  chatId?: string
  /** A validated user email (docs/contract.md#request-headers); invalid values are treated as absent. */
  email?: string
  /** The request's credentials; only the settings-service pair (X-Mcp-Tokens-Url / -Api-Key) is used, for the user's skills. */
  credentials?: RequestCredentials
}

/** Whose skills: an email (docs/contract.md#request-headers) and the request's credentials (for the X-Mcp-Tokens-* override). */
export interface SkillsRequest {
  email?: string
  credentials?: RequestCredentials
}

/** Counters since boot (or the last reset), for measurement and the logs. */
export interface RenderStats {
  /** Answers served from the cache, including callers that joined an in-flight render. */
  hits: number
  /** Answers that needed a render. */
  misses: number
  /** hits / (hits + misses); 0 before the first call. */
  hitRatio: number
  renders: number
  /** Mean and max wall time of one render, in milliseconds. */
  avgRenderMs: number
  maxRenderMs: number
  /** Entries currently cached. */
  entries: number
}

/**
 * The one prompt renderer every tier derives from (docs/contract.md#prompt-tiers). Renders are cached per (chat, email)
 * for the TTL (60 s) in a bounded LRU; concurrent misses for one key render once.
 */
export interface PromptService {
  /**
   * The rendered prompt. Byte-stable within the cache window (links carry day-stable tokens). With
   * SINGLE_USER_MODE=true any given chat renders as `default`. Rejects CORE_INVALID_CHAT_ID for a chat
   * id that fails docs/contract.md#chat-id-validation.
   */
  render (req: RenderRequest): Promise<string>
  /** Drops the cached renders of one chat (or of every chat). The next render re-reads everything. */
  invalidate (chatId?: string): void
  /** Drops the cached renders of every chat rendered for this email (its skill set changed, docs/contract.md#render-cache). */
  invalidateUser (email: string): void
  /**
   * The skills offered to this user, in prompt order (user, public, examples; alphabetical within
   * each): every public skill, examples when SKILLS_INCLUDE_EXAMPLES=true or enabled for the user, and
   * the user's ready ZIP skills. A plain string is an email. Never waits longer than the user-skills bound.
   */
  skills (who?: string | SkillsRequest): Promise<SkillEntry[]>
  /**
   * The SKILL.md text of a skill offered to this user (by its sandbox `location`), or undefined when
   * the user is not offered that skill or the file is unreadable. At most 256 KiB.
   */
  readSkill (location: string, who?: SkillsRequest): Promise<string | undefined>
  /**
   * The skills offered to this user (as `skills`) with the folder on the server holding each (SKILL.md at
   * its top), by sandbox `location`. For serving the skills' files over MCP; folders are never shown to clients.
   */
  skillFolders (who?: SkillsRequest): Promise<{ skills: SkillEntry[], folders: ReadonlyMap<string, string> }>
  /** Re-reads the skills directory and invalidates every cached render. */
  reloadSkills (): Promise<void>
  /** Which chat a render for `chatId` really uses (`default` under SINGLE_USER_MODE=true). */
  effectiveChat (chatId: string): string
  stats (): RenderStats
}

declare module 'fastify' {
  interface FastifyInstance { prompts: PromptService }
}
