import type { FastifyBaseLogger } from 'fastify'
import { SANDBOX_SKILLS } from '../../core/chat-paths.js'
import { validEmail } from '../../core/identity.js'
import { createCacheBudget } from './cache-budget.js'
import { createConfigCache, type ConfigCacheOptions } from './config-cache.js'
import type { UserConfig } from './settings-client.js'
import { createSourcePolicy, type SettingsSource } from './settings-source.js'
import { createSkillStore, type StoreOptions } from './store.js'
import type { SkillsChangedListener, SkillUser, UserSkill, UserSkillSet, UserSkillsService } from './types.js'

export interface ServiceOptions extends ConfigCacheOptions, StoreOptions {
  tokensUrl: string
  tokensApiKey: string
  /** MCP_TOKENS_URL_ALLOW as origins */
  tokensUrlAllow: readonly string[]
  /** SKILLS_CACHE_MAX_BYTES */
  cacheMaxBytes: number
  mountWaitMs: number
  /** Chats whose mounted skills are held against eviction (the oldest hold is let go beyond this). */
  maxHeldChats?: number
}

const DEFAULTS: UserSkillSet = { origin: 'defaults', enabled: { public: [], examples: [] }, ready: [], pending: [] }

/** The service plus its boot step (folders, tmp cleanup). */
export async function createUserSkillsService (opts: ServiceOptions, log: FastifyBaseLogger): Promise<UserSkillsService> {
  const listeners: SkillsChangedListener[] = []
  const emit = (email: string): void => {
    for (const listener of listeners) {
      try { listener(email) } catch (err) { log.warn({ err }, 'a skills-changed listener failed') }
    }
  }
  const sourceOf = createSourcePolicy({ url: opts.tokensUrl, apiKey: opts.tokensApiKey, allow: opts.tokensUrlAllow }, log)
  // Evictions start only once init() ran, after `store` exists.
  const budget = createCacheBudget({ cacheDir: opts.cacheDir, maxBytes: opts.cacheMaxBytes, now: opts.now, onEvict: key => { store.evicted(key) } }, log)
  const configs = createConfigCache(opts, budget, log, emit)
  const store = createSkillStore(opts, budget, log)
  await configs.init()
  await store.init()
  await budget.init()
  // The skills a chat's sandbox was given stay held while it may run (released when it stops).
  const held = new Map<string, () => void>()
  const maxHeld = opts.maxHeldChats ?? 10000
  function holdFor (chatId: string, release: () => void): void {
    const before = held.get(chatId)
    held.delete(chatId)
    held.set(chatId, release)
    before?.()
    const oldest = held.size > maxHeld ? held.keys().next().value : undefined
    if (oldest !== undefined) service.release(oldest)
  }

  /** Starts the download of a user skill unless it runs already or was refused lately; tells the listeners when it lands. */
  function download (source: SettingsSource, email: string, name: string, sha256: string): Promise<boolean> | undefined {
    const running = store.pending(sha256)
    if (running !== undefined) return running
    if (store.refused(sha256)) return undefined
    const job = store.fetch(source, name, sha256)
    void job.then(ok => { if (ok) emit(email) })
    return job
  }

  async function resolve (who: SkillUser, downloads: boolean): Promise<{ set: UserSkillSet, jobs: Array<Promise<boolean>> }> {
    const email = validEmail(who.email)
    const source = sourceOf(who.credentials)
    if (email === undefined || source === undefined) return { set: DEFAULTS, jobs: [] }
    const { config, origin } = await configs.lookup(source, email)
    if (config === undefined) return { set: { ...DEFAULTS, origin }, jobs: [] }
    return await assemble(config, origin, downloads ? (name, sha) => download(source, email, name, sha) : undefined)
  }

  async function assemble (config: UserConfig, origin: UserSkillSet['origin'], start?: (name: string, sha256: string) => Promise<boolean> | undefined): Promise<{ set: UserSkillSet, jobs: Array<Promise<boolean>> }> {
    const ready: UserSkill[] = []
    const pending: string[] = []
    const jobs: Array<Promise<boolean>> = []
    for (const { name, sha256 } of config.user) {
      const stored = await store.ready(sha256)
      if (stored !== undefined) { ready.push({ name, sha256, ...stored }); continue }
      pending.push(name)
      const job = start?.(name, sha256)
      if (job !== undefined) jobs.push(job)
    }
    return { set: { origin, enabled: { public: config.public, examples: config.examples }, ready, pending }, jobs }
  }

  const service: UserSkillsService = {
    async forUser (who) { return (await resolve(who, true)).set },

    async cached (who) { return (await resolve(who, false)).set },

    async mounts (who, chatId) {
      let { set, jobs } = await resolve(who, true)
      if (jobs.length > 0 && opts.mountWaitMs > 0) {
        let timer: NodeJS.Timeout | undefined
        await Promise.race([Promise.allSettled(jobs), new Promise(resolve => { timer = setTimeout(resolve, opts.mountWaitMs) })])
        clearTimeout(timer)
        set = (await resolve(who, false)).set
      }
      // Held first, then checked again: a skill evicted between the two reads is not handed out
      // (a bind mount of a missing folder would fail the sandbox's creation).
      const release = store.hold(set.ready.map(s => s.sha256))
      const ready: UserSkill[] = []
      for (const s of set.ready) if (await store.ready(s.sha256) !== undefined) ready.push(s)
      if (chatId === undefined) release()
      else holdFor(chatId, release)
      return ready.map(s => ({ hostDir: s.hostDir, target: `${SANDBOX_SKILLS}/user/${s.name}` }))
    },

    release (chatId) {
      const release = held.get(chatId)
      held.delete(chatId)
      release?.()
    },

    onChange (listener) { listeners.push(listener) },

    async close () {
      for (const release of held.values()) release()
      held.clear()
      await Promise.allSettled([store.close(), configs.close()])
    }
  }
  return service
}
