/*
 * The settings service's wire (docs/contract.md#skills): the only code that talks to it. Every
 * answer is bounded in time and size; redirects are refused, since the internal API key must never
 * follow a redirect to another host.
 */
import { createHash } from 'node:crypto'
import { open, rm } from 'node:fs/promises'
import { Value } from 'typebox/value'
import { SKILL_NAME } from '../../core/skill-front-matter.js'
import { USER_SKILLS_SERVICE_FAILED, USER_SKILLS_ZIP_REFUSED } from './errors.js'
import { EnabledSkill } from './schemas.js'
import type { SettingsSource } from './settings-source.js'

/** A user's configuration, reduced to what the server uses. */
export interface UserConfig {
  public: string[]
  examples: string[]
  user: Array<{ name: string, sha256: string }>
}

const SHA256 = /^[0-9a-f]{64}$/
const MAX_ITEMS = 500

/** Keeps the valid entries of `enabled_skills` (invalid ones are counted in `skipped`). */
export function parseUserConfig (body: unknown): { config: UserConfig, skipped: number } {
  const list = (body as { enabled_skills?: unknown } | null)?.enabled_skills
  if (typeof body !== 'object' || body === null || !Array.isArray(list)) throw new USER_SKILLS_SERVICE_FAILED('answer has no enabled_skills list')
  const config: UserConfig = { public: [], examples: [], user: [] }
  const seen = new Set<string>()
  let skipped = 0
  for (const item of list.slice(0, MAX_ITEMS)) {
    if (!Value.Check(EnabledSkill, item) || !SKILL_NAME.test(item.name)) { skipped++; continue }
    const category = item.category === 'examples' ? 'example' : item.category
    const key = `${category}/${item.name}`
    if (seen.has(key)) continue
    seen.add(key)
    if (category === 'public') config.public.push(item.name)
    else if (category === 'example') config.examples.push(item.name)
    else if (category === 'user' && typeof item.zip_sha256 === 'string' && SHA256.test(item.zip_sha256.toLowerCase())) {
      config.user.push({ name: item.name, sha256: item.zip_sha256.toLowerCase() })
    } else skipped++
  }
  skipped += Math.max(0, list.length - MAX_ITEMS)
  for (const l of [config.public, config.examples]) l.sort()
  config.user.sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
  return { config, skipped }
}

/** Limits of one request; `signal` aborts it early (the server is closing). */
export interface RequestLimits { timeoutMs: number, maxBytes: number, signal?: AbortSignal }

async function get (url: string, apiKey: string, timeoutMs: number, stop?: AbortSignal): Promise<Response> {
  let res: Response
  const timeout = AbortSignal.timeout(timeoutMs)
  try {
    res = await fetch(url, { headers: { 'X-Internal-Api-Key': apiKey, Accept: '*/*' }, redirect: 'error', signal: stop === undefined ? timeout : AbortSignal.any([timeout, stop]) })
  } catch (err) {
    const e = err as { name?: string, cause?: { code?: string } }
    const why = e.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : e.cause?.code ?? e.name ?? 'network error'
    throw new USER_SKILLS_SERVICE_FAILED(why)
  }
  if (res.status !== 200) {
    await res.body?.cancel().catch(() => {})
    throw new USER_SKILLS_SERVICE_FAILED(`HTTP ${res.status}`)
  }
  return res
}

/** Reads a body up to `maxBytes`, cancelling the rest. */
async function readBounded (res: Response, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of res.body ?? []) {
    size += chunk.byteLength
    if (size > maxBytes) throw new USER_SKILLS_SERVICE_FAILED(`answer larger than ${maxBytes} bytes`)
    chunks.push(Buffer.from(chunk))
  }
  return Buffer.concat(chunks)
}

/** GET {url}/api/internal/user-config/{email} (timeout `timeoutMs`, body ≤ `maxBytes`). */
export async function fetchUserConfig (source: SettingsSource, email: string, limits: RequestLimits): Promise<{ config: UserConfig, skipped: number }> {
  const res = await get(`${source.url}/api/internal/user-config/${encodeURIComponent(email)}`, source.apiKey, limits.timeoutMs, limits.signal)
  let body: unknown
  try {
    body = JSON.parse((await readBounded(res, limits.maxBytes)).toString('utf8'))
  } catch (err) {
    if (err instanceof USER_SKILLS_SERVICE_FAILED) throw err
    throw new USER_SKILLS_SERVICE_FAILED((err as Error).name === 'TimeoutError' ? 'answer too slow' : 'answer is not JSON')
  }
  return parseUserConfig(body)
}

/**
 * GET {url}/api/internal/skills/{name}/download streamed into `dest` (created exclusively), hashed on
 * the way; more than `maxBytes` or `timeoutMs` for the whole transfer aborts it. The caller compares
 * the hash before anything reads the file. On failure `dest` is removed.
 */
export async function downloadZip (source: SettingsSource, name: string, dest: string, limits: RequestLimits): Promise<{ sha256: string, bytes: number }> {
  const deadline = AbortSignal.timeout(limits.timeoutMs)
  const file = await open(dest, 'wx', 0o600)
  const hash = createHash('sha256')
  let bytes = 0
  try {
    let res: Response
    try {
      res = await get(`${source.url}/api/internal/skills/${encodeURIComponent(name)}/download`, source.apiKey, limits.timeoutMs, limits.signal)
    } catch (err) { throw new USER_SKILLS_ZIP_REFUSED(`download failed (${(err as Error).message})`) }
    const declared = Number(res.headers.get('content-length') ?? NaN)
    if (Number.isFinite(declared) && declared > limits.maxBytes) throw new USER_SKILLS_ZIP_REFUSED(`ZIP is ${declared} bytes, more than ${limits.maxBytes}`)
    const reader = res.body?.getReader()
    while (reader !== undefined) {
      if (deadline.aborted) { await reader.cancel().catch(() => {}); throw new USER_SKILLS_ZIP_REFUSED(`download took longer than ${limits.timeoutMs} ms`) }
      if (limits.signal?.aborted === true) { await reader.cancel().catch(() => {}); throw new USER_SKILLS_ZIP_REFUSED('download stopped: the server is shutting down') }
      const { done, value } = await reader.read()
      if (done) break
      bytes += value.byteLength
      if (bytes > limits.maxBytes) { await reader.cancel().catch(() => {}); throw new USER_SKILLS_ZIP_REFUSED(`ZIP larger than ${limits.maxBytes} bytes`) }
      hash.update(value)
      await file.write(value)
    }
    await file.close()
    return { sha256: hash.digest('hex'), bytes }
  } catch (err) {
    await file.close().catch(() => {})
    await rm(dest, { force: true })
    const e = err as { name?: string }
    if (err instanceof USER_SKILLS_ZIP_REFUSED) throw err
    throw new USER_SKILLS_ZIP_REFUSED(e.name === 'TimeoutError' ? `download took longer than ${limits.timeoutMs} ms` : 'download interrupted', { cause: err })
  }
}
