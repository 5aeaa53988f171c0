/*
 * The user skill cache on disk (SKILLS_CACHE_DIR), content-addressed by the ZIP's verified SHA-256:
 *   skills/<sha256>/   an extracted skill, SKILL.md at its top; immutable once renamed into place
 *   tmp/               downloads and extractions in progress (emptied at boot)
 * A new version of a skill is a new hash, so a running sandbox keeps the tree it mounted while the
 * new one is swapped in by one rename. Only verified bytes are ever extracted.
 */
import { randomBytes } from 'node:crypto'
import { lstat, mkdir, readFile, rename, rm } from 'node:fs/promises'
import { join } from 'node:path'
import type { FastifyBaseLogger } from 'fastify'
import { MAX_SKILL_MD_BYTES, parseFrontMatter } from '../../core/skill-front-matter.js'
import type { CacheBudget } from './cache-budget.js'
import { treeBytes } from './cache-budget.js'
import { USER_SKILLS_ZIP_REFUSED } from './errors.js'
import { downloadZip } from './settings-client.js'
import type { SettingsSource } from './settings-source.js'
import { extractSkillZip } from './zip-extract.js'

export interface StoreOptions {
  cacheDir: string
  cacheHostDir: string
  downloadTimeoutMs: number
  maxZipBytes: number
  maxExtractBytes: number
  maxEntries: number
  maxConcurrentDownloads: number
  refusedRetryMs: number
  now: () => number
}

export interface StoredSkill { dir: string, hostDir: string, description: string }

export interface SkillStore {
  /** Creates the folders and empties tmp/. */
  init (): Promise<void>
  /** The extracted skill of this hash, when present and valid. */
  ready (sha256: string): Promise<StoredSkill | undefined>
  /** Downloads, verifies and extracts (single flight per hash); resolves false when refused. Never rejects. */
  fetch (source: SettingsSource, name: string, sha256: string): Promise<boolean>
  /** A download of this hash is running. */
  pending (sha256: string): Promise<boolean> | undefined
  /** Refused recently (bad hash, unsafe ZIP, download failure, no room): not fetched again before the retry time. */
  refused (sha256: string): boolean
  /** Holds these skills against eviction until the returned release (a call or a sandbox uses them). */
  hold (sha256s: readonly string[]): () => void
  /** The cache dropped this entry (cache-budget.ts): forget what was known of it. */
  evicted (key: string): void
  /** Aborts downloads in flight and waits for them (their files are removed). */
  close (): Promise<void>
}

export const skillKey = (sha256: string): string => `skills/${sha256}`

export function createSkillStore (opts: StoreOptions, budget: CacheBudget, log: FastifyBaseLogger): SkillStore {
  const skillsDir = join(opts.cacheDir, 'skills')
  const tmpDir = join(opts.cacheDir, 'tmp')
  const known = new Map<string, StoredSkill | null>()
  const running = new Map<string, Promise<boolean>>()
  const refusedUntil = new Map<string, number>()
  const closing = new AbortController()
  let active = 0
  const queue: Array<() => void> = []

  async function slot (): Promise<() => void> {
    if (active >= opts.maxConcurrentDownloads) await new Promise<void>(resolve => queue.push(resolve))
    active++
    return () => { active--; queue.shift()?.() }
  }

  async function readStored (sha256: string): Promise<StoredSkill | undefined> {
    const dir = join(skillsDir, sha256)
    const info = await lstat(join(dir, 'SKILL.md')).catch(() => undefined)
    if (info === undefined || !info.isFile() || info.size > MAX_SKILL_MD_BYTES) return undefined
    // The entry may be evicted while it is read.
    const text = await readFile(join(dir, 'SKILL.md'), 'utf8').catch(() => undefined)
    const parsed = text === undefined ? undefined : parseFrontMatter(text)
    if (parsed?.ok !== true) return undefined
    return { dir, hostDir: join(opts.cacheHostDir, 'skills', sha256), description: parsed.description }
  }

  /** Extracts into tmp/, checks SKILL.md, renames into place. */
  async function install (zipFile: string, sha256: string, name: string): Promise<void> {
    const staging = join(tmpDir, `x-${randomBytes(8).toString('hex')}`)
    try {
      await extractSkillZip(zipFile, staging, { maxEntries: opts.maxEntries, maxBytes: opts.maxExtractBytes })
      const info = await lstat(join(staging, 'SKILL.md'))
      if (info.size > MAX_SKILL_MD_BYTES) throw new USER_SKILLS_ZIP_REFUSED('SKILL.md is larger than 256 KiB')
      const parsed = parseFrontMatter(await readFile(join(staging, 'SKILL.md'), 'utf8'))
      if (!parsed.ok) throw new USER_SKILLS_ZIP_REFUSED(`SKILL.md front matter: ${parsed.reason}`)
      if (parsed.name !== name) log.warn({ skill: name, frontMatterName: parsed.name }, 'user skill name differs from its SKILL.md; the configured name decides the location')
      const bytes = await treeBytes(staging)
      if (!await budget.admit(skillKey(sha256), bytes)) {
        throw new USER_SKILLS_ZIP_REFUSED(`no room in the skill cache (SKILLS_CACHE_MAX_BYTES): ${bytes} bytes needed, ${budget.used()} held by skills in use`)
      }
      try {
        await rename(staging, join(skillsDir, sha256))
      } catch (err) {
        // Someone installed the same verified bytes first: theirs is identical.
        const code = (err as { code?: string }).code
        if (code !== 'ENOTEMPTY' && code !== 'EEXIST') { budget.forget(skillKey(sha256)); throw err }
      }
    } finally {
      await rm(staging, { recursive: true, force: true })
    }
  }

  async function run (source: SettingsSource, name: string, sha256: string): Promise<boolean> {
    const release = await slot()
    // The skill being installed is in use by this call: another admission must not evict it.
    const unpin = budget.pin(skillKey(sha256))
    const zipFile = join(tmpDir, `z-${randomBytes(8).toString('hex')}.zip`)
    const started = opts.now()
    try {
      if (closing.signal.aborted) throw new USER_SKILLS_ZIP_REFUSED('the server is shutting down')
      const got = await downloadZip(source, name, zipFile, { timeoutMs: opts.downloadTimeoutMs, maxBytes: opts.maxZipBytes, signal: closing.signal })
      if (got.sha256 !== sha256) throw new USER_SKILLS_ZIP_REFUSED(`SHA-256 mismatch (expected ${sha256.slice(0, 12)}…, got ${got.sha256.slice(0, 12)}…)`)
      await install(zipFile, sha256, name)
      known.delete(sha256)
      log.info({ skill: name, sha256: sha256.slice(0, 12), bytes: got.bytes, ms: opts.now() - started }, 'user skill downloaded, verified and installed')
      return true
    } catch (err) {
      refusedUntil.set(sha256, opts.now() + opts.refusedRetryMs)
      const reason = err instanceof USER_SKILLS_ZIP_REFUSED ? err.message : 'unexpected error'
      log.warn({ skill: name, sha256: sha256.slice(0, 12), reason, ...(reason === 'unexpected error' && { err }) }, 'user skill refused; nothing was extracted')
      return false
    } finally {
      await rm(zipFile, { force: true })
      unpin()
      release()
    }
  }

  return {
    async init () {
      await mkdir(skillsDir, { recursive: true, mode: 0o755 })
      await rm(tmpDir, { recursive: true, force: true })
      await mkdir(tmpDir, { recursive: true, mode: 0o700 })
    },

    async ready (sha256) {
      // The budget is the index of what the cache holds: an evicted skill is gone even mid-read.
      const key = skillKey(sha256)
      if (!budget.has(key)) return undefined
      budget.touch(key)
      const memo = known.get(sha256)
      if (memo !== undefined) return memo ?? undefined
      const stored = await readStored(sha256)
      // Absence is not memoised: a download may install it any moment.
      if (stored !== undefined && budget.has(key)) known.set(sha256, stored)
      return budget.has(key) ? stored : undefined
    },

    fetch (source, name, sha256) {
      const current = running.get(sha256)
      if (current !== undefined) return current
      const job = run(source, name, sha256).finally(() => { running.delete(sha256) })
      running.set(sha256, job)
      return job
    },

    pending: sha256 => running.get(sha256),

    refused (sha256) {
      const until = refusedUntil.get(sha256)
      if (until === undefined) return false
      if (opts.now() < until) return true
      refusedUntil.delete(sha256)
      return false
    },

    hold (sha256s) {
      const releases = sha256s.map(sha => budget.pin(skillKey(sha)))
      return () => { for (const r of releases) r() }
    },

    evicted (key) {
      if (key.startsWith('skills/')) known.delete(key.slice('skills/'.length))
    },

    async close () {
      closing.abort()
      await Promise.allSettled([...running.values()])
    }
  }
}
