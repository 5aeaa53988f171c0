import type { FastifyBaseLogger } from 'fastify'
import { SANDBOX_SKILLS } from '../../core/chat-paths.js'
import { validEmail } from '../../core/identity.js'
import { createConfigCache, type ConfigCacheOptions } from './config-cache.js'
import { resolveSource, type SettingsSource, type UserConfig } from './settings-client.js'
import { createSkillStore, type StoreOptions } from './store.js'
import type { SkillsChangedListener, SkillUser, UserSkill, UserSkillSet, UserSkillsService } from './types.js'

export interface ServiceOptions extends ConfigCacheOptions, StoreOptions {
  tokensUrl: string
  tokensApiKey: string
  mountWaitMs: number
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
  const configs = createConfigCache(opts, log, emit)
  const store = createSkillStore(opts, log)
  await configs.init()
  await store.init()

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
    const source = resolveSource({ url: opts.tokensUrl, apiKey: opts.tokensApiKey }, who.credentials)
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

    async mounts (who) {
      let { set, jobs } = await resolve(who, true)
      if (jobs.length > 0 && opts.mountWaitMs > 0) {
        let timer: NodeJS.Timeout | undefined
        await Promise.race([Promise.allSettled(jobs), new Promise(resolve => { timer = setTimeout(resolve, opts.mountWaitMs) })])
        clearTimeout(timer)
        set = (await resolve(who, false)).set
      }
      return set.ready.map(s => ({ hostDir: s.hostDir, target: `${SANDBOX_SKILLS}/user/${s.name}` }))
    },

    onChange (listener) { listeners.push(listener) }
  }
  return service
}
