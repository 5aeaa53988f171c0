/*
 * A user's configuration (docs/contract.md#skills): memory for `memoryTtlMs`, then the last good answer
 * on disk, then the defaults. Requests are single flight per (service, email); a caller waits at most
 * `waitMs` and then gets the fallback while the request goes on (its answer serves the next call). A
 * failure is remembered for `failureTtlMs`, so a service that is down costs no waiting at all, and it
 * is logged at warn once until the service answers again.
 */
import { createHash, randomBytes } from 'node:crypto'
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { FastifyBaseLogger } from 'fastify'
import QuickLRU from 'quick-lru'
import { fileBytes, type CacheBudget } from './cache-budget.js'
import { fetchUserConfig, parseUserConfig, type UserConfig } from './settings-client.js'
import type { SettingsSource } from './settings-source.js'
import type { SkillSetOrigin } from './types.js'

export interface ConfigCacheOptions {
  cacheDir: string
  memoryTtlMs: number
  requestTimeoutMs: number
  waitMs: number
  failureTtlMs: number
  maxConfigBytes: number
  maxUsers: number
  now: () => number
}

/** A configuration and where it came from; `config` undefined = the defaults. */
export interface Lookup { config: UserConfig | undefined, origin: SkillSetOrigin }

interface Remembered { config: UserConfig | undefined, origin: SkillSetOrigin, expires: number }

export interface ConfigCache {
  init (): Promise<void>
  /** The configuration within the wait bound; never rejects. `changed` hears when an answer differs from what was known. */
  lookup (source: SettingsSource, email: string): Promise<Lookup>
  /** Aborts the requests in flight and waits for them. */
  close (): Promise<void>
}

const sameConfig = (a: UserConfig | undefined, b: UserConfig | undefined): boolean => JSON.stringify(a ?? null) === JSON.stringify(b ?? null)

export function createConfigCache (opts: ConfigCacheOptions, budget: CacheBudget, log: FastifyBaseLogger, changed: (email: string) => void): ConfigCache {
  const dir = join(opts.cacheDir, 'configs')
  const memory = new QuickLRU<string, Remembered>({ maxSize: opts.maxUsers })
  const inflight = new Map<string, Promise<UserConfig | undefined>>()
  // Sources currently failing (by id): warned once, until one answer succeeds.
  const failing = new Set<string>()
  const closing = new AbortController()

  // No user string in host paths: the file name is a hash of the service and the email.
  const nameOf = (key: string): string => `${createHash('sha256').update(key).digest('hex').slice(0, 32)}.json`
  const fileOf = (key: string): string => join(dir, nameOf(key))
  const entryOf = (key: string): string => `configs/${nameOf(key)}`

  async function readDisk (key: string): Promise<UserConfig | undefined> {
    // Only what the budget holds: an evicted file is gone even if a rename has not happened yet.
    if (!budget.has(entryOf(key))) return undefined
    budget.touch(entryOf(key))
    try {
      const raw = await readFile(fileOf(key), 'utf8')
      if (raw.length > opts.maxConfigBytes) return undefined
      return parseUserConfig(JSON.parse(raw) as unknown).config
    } catch { return undefined }
  }

  async function writeDisk (key: string, email: string, config: UserConfig): Promise<void> {
    const tmp = `${fileOf(key)}.${randomBytes(4).toString('hex')}.tmp`
    // Stored in the service's own shape, so one parser reads both.
    const body = {
      email,
      enabled_skills: [
        ...config.public.map(name => ({ name, category: 'public' })),
        ...config.examples.map(name => ({ name, category: 'example' })),
        ...config.user.map(u => ({ name: u.name, category: 'user', zip_sha256: u.sha256 }))
      ]
    }
    const text = JSON.stringify(body)
    const unpin = budget.pin(entryOf(key))
    try {
      if (!await budget.admit(entryOf(key), fileBytes(Buffer.byteLength(text)))) {
        log.debug('the skill cache is full of entries in use: this configuration is not kept on disk')
        return
      }
      try {
        await writeFile(tmp, text, { mode: 0o600 })
        await rename(tmp, fileOf(key))
      } catch (err) {
        budget.forget(entryOf(key))
        await rm(tmp, { force: true })
        log.warn({ err }, 'could not write the user skill configuration cache')
      }
    } finally { unpin() }
  }

  async function fallback (key: string): Promise<Lookup> {
    const disk = await readDisk(key)
    return disk !== undefined ? { config: disk, origin: 'disk' } : { config: undefined, origin: 'defaults' }
  }

  async function request (source: SettingsSource, email: string, key: string): Promise<UserConfig | undefined> {
    const before = memory.get(key)?.config ?? await readDisk(key)
    try {
      const { config, skipped } = await fetchUserConfig(source, email, { timeoutMs: opts.requestTimeoutMs, maxBytes: opts.maxConfigBytes, signal: closing.signal })
      if (closing.signal.aborted) return config
      if (skipped > 0) log.debug({ skipped }, 'settings service: invalid enabled_skills entries ignored')
      if (failing.delete(source.id)) log.info('settings service answers again')
      memory.set(key, { config, origin: 'memory', expires: opts.now() + opts.memoryTtlMs })
      await writeDisk(key, email, config)
      if (!sameConfig(before, config)) changed(email)
      return config
    } catch (err) {
      if (closing.signal.aborted) return undefined
      if (!failing.has(source.id)) {
        failing.add(source.id)
        log.warn({ reason: (err as Error).message }, 'settings service unavailable: using the cached or default skills (logged once until it answers again)')
      } else log.debug({ reason: (err as Error).message }, 'settings service still unavailable')
      const fb = await fallback(key)
      memory.set(key, { ...fb, expires: opts.now() + opts.failureTtlMs })
      return fb.config
    }
  }

  return {
    async init () { await mkdir(dir, { recursive: true, mode: 0o700 }) },

    async lookup (source, email) {
      const key = `${source.id}\u0000${email.toLowerCase()}`
      const remembered = memory.get(key)
      if (remembered !== undefined && remembered.expires > opts.now()) return { config: remembered.config, origin: remembered.origin }
      let job = inflight.get(key)
      if (job === undefined) {
        const started = request(source, email, key).finally(() => { inflight.delete(key) })
        inflight.set(key, started)
        job = started
      }
      let timer: NodeJS.Timeout | undefined
      const timeout = new Promise<'timeout'>(resolve => { timer = setTimeout(() => resolve('timeout'), opts.waitMs) })
      try {
        const result = await Promise.race([job.then(config => ({ config })), timeout])
        if (result !== 'timeout') {
          const now = memory.get(key)
          return { config: result.config, origin: now?.origin === 'memory' ? 'service' : now?.origin ?? 'defaults' }
        }
      } finally { clearTimeout(timer) }
      return await fallback(key)
    },

    async close () {
      closing.abort()
      await Promise.allSettled([...inflight.values()])
    }
  }
}
