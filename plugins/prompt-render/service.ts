import { performance } from 'node:perf_hooks'
import type { FastifyBaseLogger } from 'fastify'
import QuickLRU from 'quick-lru'
import { requireChatId } from '../../core/chat-id.js'
import type { SubagentCli } from '../../core/config.js'
import { validEmail } from '../../core/identity.js'
import type { LinkService } from '../capabilities/types.js'
import { loadSkillsIndex, type SkillsIndex } from './skills.js'
import { buildPrompt, type PromptVars } from './template.js'
import type { PromptService, RenderRequest, RenderStats, SkillEntry } from './types.js'

export interface PromptDeps {
  links: LinkService
  log: FastifyBaseLogger
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
  ttlMs: number
  maxEntries: number
  maxBytes: number
}

// The key separator cannot occur in a valid chat id or email.
const SEP = '\u0000'
const keyOf = (chatId: string | undefined, email: string | undefined): string => `${chatId ?? ''}${SEP}${email ?? ''}`

/**
 * Skills that teach one tool, listed only while that tool is registered: without the sub-agent plugin
 * the prompt never points at a sub_agent skill (issue #12).
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

  function defaultSkills (): SkillEntry[] {
    const tools = opts.tools()
    return index.all.filter(s => (s.category === 'public' || (opts.includeExamples && s.category === 'examples')) &&
      (!Object.hasOwn(TOOL_SKILLS, s.name) || tools.includes(TOOL_SKILLS[s.name] as string)))
  }

  function vars (chatId: string | undefined, email: string | undefined): Omit<PromptVars, 'skills' | 'omittedSkills'> {
    const common = {
      skillDirs: index.dirs,
      commandTimeoutSeconds: opts.commandTimeoutSeconds,
      subagentCli: opts.subagentCli,
      networkEnabled: opts.networkEnabled,
      tools: opts.tools(),
      ...(email !== undefined && { email })
    }
    if (chatId === undefined) return { ...common, chatId: '{chat_id}', filesBase: '{file_base_url}', archiveUrl: '{archive_url}' }
    return { ...common, chatId, filesBase: links.filesBase(chatId), archiveUrl: links.archiveUrl(chatId), previewUrl: links.previewUrl(chatId, 'f') }
  }

  /** Renders with every skill, dropping skills from the end until the text fits the byte cap. */
  function renderNow (chatId: string | undefined, email: string | undefined): string {
    const base = vars(chatId, email)
    const skills = defaultSkills()
    let keep = skills.length
    let text = buildPrompt({ ...base, skills, omittedSkills: 0 })
    while (Buffer.byteLength(text, 'utf8') > opts.maxBytes && keep > 0) {
      keep = Math.max(0, keep - Math.max(1, Math.ceil(keep / 8)))
      text = buildPrompt({ ...base, skills: skills.slice(0, keep), omittedSkills: skills.length - keep })
    }
    return text
  }

  function timedRender (chatId: string | undefined, email: string | undefined): string {
    const started = performance.now()
    const text = renderNow(chatId, email)
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
      const key = keyOf(chatId, email)
      const cached = cache.get(key)
      if (cached !== undefined) { counters.hits++; return cached }
      const pending = inflight.get(key)
      if (pending !== undefined) { counters.hits++; return await pending }
      counters.misses++
      const startedAt = epoch
      // Rendering is synchronous today; the promise keeps single flight correct if a step becomes async.
      const promise = Promise.resolve().then(() => timedRender(chatId, email))
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

    async skills () { return defaultSkills() },

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
