/*
 * Shared by the user-skills tests: the service against a fake settings service on loopback, with a
 * logger that records every line, and a helper that enables one ZIP skill and waits for it.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'
import type { FastifyBaseLogger } from 'fastify'
import { createUserSkillsService, type ServiceOptions } from '../../../plugins/user-skills/service.js'
import type { UserSkillsService } from '../../../plugins/user-skills/types.js'
import { sha256 } from '../../fixtures/raw-zip.js'
import { startSettingsService, type FakeSettings } from '../../fixtures/settings-service.js'

export interface Logged { level: string, obj: Record<string, unknown>, msg: string }

export function recordingLogger (lines: Logged[]): FastifyBaseLogger {
  const at = (level: string) => (obj: unknown, msg?: string) => { lines.push({ level, obj: typeof obj === 'object' && obj !== null ? obj as Record<string, unknown> : {}, msg: msg ?? String(obj) }) }
  const log = { trace: at('trace'), debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error'), fatal: at('fatal'), silent: () => {}, level: 'trace', child: () => log }
  return log as unknown as FastifyBaseLogger
}

export interface Setup { svc: UserSkillsService, fake: FakeSettings, cacheDir: string, logs: Logged[] }

/** The service with test-sized limits; `over` replaces any option, `service` reuses a fake. Closed when the test ends. */
export async function setup (t: Test, over: Partial<ServiceOptions> = {}, service?: FakeSettings): Promise<Setup> {
  const fake = service ?? await startSettingsService(t)
  const cacheDir = over.cacheDir ?? await mkdtemp(join(tmpdir(), 'user-skills-'))
  if (over.cacheDir === undefined) t.teardown(async () => { await rm(cacheDir, { recursive: true, force: true }) })
  const logs: Logged[] = []
  const svc = await createUserSkillsService({
    tokensUrl: fake.url,
    tokensApiKey: fake.apiKey,
    tokensUrlAllow: [],
    cacheMaxBytes: 1 << 30,
    cacheDir,
    cacheHostDir: '/daemon/view/skills-cache',
    memoryTtlMs: 60000,
    requestTimeoutMs: 2000,
    waitMs: 1500,
    failureTtlMs: 15000,
    maxConfigBytes: 1 << 20,
    maxUsers: 100,
    downloadTimeoutMs: 5000,
    maxZipBytes: 1 << 20,
    maxExtractBytes: 1 << 20,
    maxEntries: 100,
    maxConcurrentDownloads: 2,
    mountWaitMs: 3000,
    refusedRetryMs: 600000,
    now: Date.now,
    ...over
  }, recordingLogger(logs))
  t.teardown(async () => { await svc.close() })
  return { svc, fake, cacheDir, logs }
}

export const userSkill = (name: string, zip: Buffer): Record<string, unknown> => ({ name, description: 'ignored', category: 'user', skill_path: null, zip_sha256: sha256(zip) })

/** Enables `zip` as the user's skill `name` and waits for its download to settle (mounts() waits). */
export async function offer (fake: FakeSettings, svc: UserSkillsService, email: string, name: string, zip: Buffer, hash = sha256(zip)): Promise<string[]> {
  fake.users.set(email, [{ ...userSkill(name, zip), zip_sha256: hash }])
  fake.zips.set(name, zip)
  return (await svc.mounts({ email })).map(m => m.target)
}
