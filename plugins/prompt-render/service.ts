import { createHash } from 'node:crypto'
import { lstat, readFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { performance } from 'node:perf_hooks'
import type { FastifyBaseLogger } from 'fastify'
import QuickLRU from 'quick-lru'
import { requireChatId } from '../../core/chat-id.js'
import type { SubagentCli } from '../../core/config.js'
import { SANDBOX_SKILLS } from '../../core/chat-paths.js'
import { validEmail, type RequestCredentials } from '../../core/identity.js'
import { MAX_SKILL_MD_BYTES } from '../../core/skill-front-matter.js'
import type { LinkService } from '../capabilities/types.js'
import type { UserSkillsService } from '../user-skills/types.js'
import { loadSkillsIndex, sortSkills, type SkillsIndex } from './skills.js'
import { buildPrompt, type PromptVars } from './template.js'
import type { PromptService, RenderRequest, RenderStats, SkillEntry, SkillsRequest } from './types.js'

export interface PromptDeps {
  links: LinkService
  log: FastifyBaseLogger
  /** Per-user skills (user-skills plugin), when loaded. */
  userSkills?: UserSkillsService
}

export interface PromptServiceOptions {
  singleUserMode: 'lenient' | 'true' | 'false'
  skillsDir: string
  includeExamples: boolean
  commandTimeoutSeconds: number
  subagentCli: SubagentCli
  networkEnabled: boolean
  /** The tools clients see; read at render time (the registry is complete once the app is ready). */
  tools: () => string[]
  /** Whether app preview URLs are served (the ports plugin is loaded); read at render time. */
  apps?: () => boolean
  ttlMs: number
  maxEntries: number
  maxBytes: number
}

// The key separator cannot occur in a valid chat id or email.
const SEP = '\u0000'
/**
 * A request that brings its own settings service (X-Mcp-Tokens-*) may see other skills: its own cache
 * entries. Not an unauthenticated one: user-skills ignores its pair, and it must not fill the cache.
 */
function sourceTag (credentials: RequestCredentials | undefined): string {
  if (credentials?.mcpTokensApiKey === undefined || credentials.mcpTokensCaller === undefined) return ''
  return createHash('sha256').update(`${credentials.mcpTokensUrl ?? ''}${SEP}${credentials.mcpTokensApiKey}`).digest('hex').slice(0, 16)
}
const keyOf = (chatId: string | undefined, email: string | undefined, tag: string): string => `${chatId ?? ''}${SEP}${(email ?? '').toLowerCase()}${SEP}${tag}`

/** A skill list and where each SKILL.md lives on the server (for resources/read). */
interface Offered { skills: SkillEntry[], files: Map<string, string> }

/**
 * Skills that teach one tool, listed only while that tool is registered: without the sub-agent plugin
 * the prompt never points at a sub_agent skill (docs/contract.md#sub-agent-execution).
 */
const TOOL_SKILLS: Readonly<Record<string, string>> = { 'sub-agent': 'sub_agent' }

/** Builds the renderer; the skills index is read once here (and again on reloadSkills). */
export async function createPromptService (deps: PromptDeps, opts: PromptServiceOptions): Promise<PromptService> {
  const { links, log } = deps
  let index: SkillsIndex = await loadSkillsIndex(opts.skillsDir, log)
  const cache = new QuickLRU<string, string>({ maxSize: opts.maxEntries, maxAge: opts.ttlMs })
  const inflight = new Map<string, Promise<string>>()
  // Bumped by every invalidation: a render that started before it must not be cached after it.
  let epoch = 0
  const counters = { hits: 0, misses: 0, renders: 0, totalMs: 0, maxMs: 0 }

  const builtinFile = (s: SkillEntry): string => join(opts.skillsDir, s.location.slice(SANDBOX_SKILLS.length + 1))

  /** Public skills always; examples when configured or enabled for the user; then the user's ready ZIP skills (docs/contract.md#skills). */
  async function offered (who: SkillsRequest): Promise<Offered> {
    const email = validEmail(who.email)
    const set = email !== undefined && deps.userSkills !== undefined
      ? await deps.userSkills.forUser({ email, ...(who.credentials !== undefined && { credentials: who.credentials }) })
      : undefined
    const examples = new Set(set?.enabled.examples ?? [])
    const files = new Map<string, string>()
    const skills: SkillEntry[] = []
    const tools = opts.tools()
    for (const s of index.all) {
      if (Object.hasOwn(TOOL_SKILLS, s.name) && !tools.includes(TOOL_SKILLS[s.name] as string)) continue
      if (s.category === 'public' || (s.category === 'examples' && (opts.includeExamples || examples.has(s.name)))) {
        skills.push(s)
        files.set(s.location, builtinFile(s))
      }
    }
    for (const u of set?.ready ?? []) {
      const location = `${SANDBOX_SKILLS}/user/${u.name}/SKILL.md`
      skills.push({ name: u.name, description: u.description, category: 'user', location })
      files.set(location, join(u.dir, 'SKILL.md'))
    }
    return { skills: sortSkills(skills), files }
  }

  function vars (chatId: string | undefined, email: string | undefined, skills: SkillEntry[]): Omit<PromptVars, 'skills' | 'omittedSkills'> {
    const common = {
      skillDirs: skills.some(s => s.category === 'user') ? ['user' as const, ...index.dirs] : index.dirs,
      commandTimeoutSeconds: opts.commandTimeoutSeconds,
      subagentCli: opts.subagentCli,
      networkEnabled: opts.networkEnabled,
      tools: opts.tools(),
      ...(email !== undefined && { email })
    }
    if (chatId === undefined) return { ...common, chatId: '{chat_id}', filesBase: '{file_base_url}', archiveUrl: '{archive_url}' }
    const appsBase = opts.apps?.() === true ? `${links.publicBaseUrl}/apps/${encodeURIComponent(chatId)}` : undefined
    return { ...common, chatId, filesBase: links.filesBase(chatId), archiveUrl: links.archiveUrl(chatId), previewUrl: links.previewUrl(chatId, 'f'), ...(appsBase !== undefined && { appsBase }) }
  }

  /** Renders with every skill, dropping skills from the end until the text fits the byte cap. */
  function renderNow (chatId: string | undefined, email: string | undefined, skills: SkillEntry[]): string {
    const base = vars(chatId, email, skills)
    let keep = skills.length
    let text = buildPrompt({ ...base, skills, omittedSkills: 0 })
    while (Buffer.byteLength(text, 'utf8') > opts.maxBytes && keep > 0) {
      keep = Math.max(0, keep - Math.max(1, Math.ceil(keep / 8)))
      text = buildPrompt({ ...base, skills: skills.slice(0, keep), omittedSkills: skills.length - keep })
    }
    return text
  }

  /** The user's skills (bounded wait), then the synchronous render; the counters time the render only. */
  async function timedRender (chatId: string | undefined, email: string | undefined, credentials: RequestCredentials | undefined): Promise<string> {
    const { skills } = await offered({ ...(email !== undefined && { email }), ...(credentials !== undefined && { credentials }) })
    const started = performance.now()
    const text = renderNow(chatId, email, skills)
    const ms = performance.now() - started
    counters.renders++
    counters.totalMs += ms
    counters.maxMs = Math.max(counters.maxMs, ms)
    return text
  }

  const service: PromptService = {
    effectiveChat: chatId => opts.singleUserMode === 'true' ? 'default' : chatId,

    async render (req: RenderRequest) {
      let chatId: string | undefined
      if (req.chatId !== undefined) {
        chatId = service.effectiveChat(requireChatId(req.chatId))
      }
      const email = validEmail(req.email)
      const key = keyOf(chatId, email, sourceTag(req.credentials))
      const cached = cache.get(key)
      if (cached !== undefined) { counters.hits++; return cached }
      const pending = inflight.get(key)
      if (pending !== undefined) { counters.hits++; return await pending }
      counters.misses++
      const startedAt = epoch
      // Single flight: the user's skills may take up to the user-skills wait bound.
      const promise = timedRender(chatId, email, req.credentials)
      inflight.set(key, promise)
      try {
        const text = await promise
        if (startedAt === epoch) cache.set(key, text)
        return text
      } finally {
        if (inflight.get(key) === promise) inflight.delete(key)
      }
    },

    invalidate (chatId) {
      epoch++
      if (chatId === undefined) {
        cache.clear()
        inflight.clear()
        return
      }
      const target = service.effectiveChat(chatId)
      for (const key of [...cache.keys()]) if (key.startsWith(target + SEP)) cache.delete(key)
      for (const key of [...inflight.keys()]) if (key.startsWith(target + SEP)) inflight.delete(key)
    },

    invalidateUser (email) {
      epoch++
      const target = `${SEP}${email.toLowerCase()}${SEP}`
      for (const key of [...cache.keys()]) if (key.includes(target)) cache.delete(key)
      for (const key of [...inflight.keys()]) if (key.includes(target)) inflight.delete(key)
    },

    async skills (who) {
      return (await offered(typeof who === 'string' ? { email: who } : who ?? {})).skills
    },

    async readSkill (location, who) {
      const file = (await offered(who ?? {})).files.get(location)
      if (file === undefined) return undefined
      const info = await lstat(file).catch(() => undefined)
      if (info === undefined || !info.isFile() || info.size > MAX_SKILL_MD_BYTES) return undefined
      return await readFile(file, 'utf8').catch(() => undefined)
    },

    async skillFolders (who) {
      const { skills, files } = await offered(who ?? {})
      return { skills, folders: new Map([...files].map(([location, file]) => [location, dirname(file)])) }
    },

    async reloadSkills () {
      index = await loadSkillsIndex(opts.skillsDir, log)
      service.invalidate()
      log.info({ skills: index.all.length }, 'skills index rebuilt')
    },

    stats (): RenderStats {
      const total = counters.hits + counters.misses
      return {
        hits: counters.hits,
        misses: counters.misses,
        hitRatio: total === 0 ? 0 : counters.hits / total,
        renders: counters.renders,
        avgRenderMs: counters.renders === 0 ? 0 : counters.totalMs / counters.renders,
        maxRenderMs: counters.maxMs,
        entries: cache.size
      }
    }
  }
  return service
}
