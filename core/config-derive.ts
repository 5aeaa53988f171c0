import { availableParallelism, totalmem } from 'node:os'
import type { AppConfig, RawConfig } from './config.js'
import { CORE_INVALID_CONFIG } from './errors.js'
import { parseTrustProxy, type TrustProxy } from './trust-proxy.js'

/*
 * The checks and derived values of loadConfig (config.ts) that need more than one line: secrets, where
 * to listen, the public base URL, OAuth/OIDC and the user skill cache as the Docker daemon sees it.
 */

/** Shortest accepted MCP_API_KEY / LINK_SIGNING_KEY: tokens signed with them can be attacked offline. */
export const MIN_KEY_LENGTH = 32
const GENERATE_KEY = 'generate one with: openssl rand -hex 32   or: node -e "console.log(require(\'node:crypto\').randomBytes(32).toString(\'hex\'))"'

/** Refuses weak or unusable secrets; the message never contains the secret. */
export function checkKey (name: 'MCP_API_KEY' | 'LINK_SIGNING_KEY', value: string): void {
  if (value === '') return
  if (value.length < MIN_KEY_LENGTH) {
    throw new CORE_INVALID_CONFIG(name, `it is ${value.length} characters; at least ${MIN_KEY_LENGTH} are required, since capability tokens derived from it can be attacked offline; ${GENERATE_KEY}`)
  }
  if (name === 'MCP_API_KEY' && /\s/.test(value)) {
    throw new CORE_INVALID_CONFIG(name, `it contains whitespace, which an Authorization header cannot carry; ${GENERATE_KEY}`)
  }
}

/**
 * Protected mode: MCP_API_KEY is set, so /mcp and every chat route need credentials; open mode
 * (development) otherwise. The one place this is decided: the config (AppConfig.protectedMode) and
 * core auth (fastify.auth.protectedMode, which plugins read) both ask here.
 */
export function protectedMode (apiKey: string): boolean {
  return apiKey !== ''
}

/** HOST, TRUST_PROXY: where to listen and whom to believe about client addresses. */
export function deriveNetwork (raw: RawConfig): Pick<AppConfig, 'host' | 'hostDefaultedToLoopback' | 'trustProxy'> {
  let trustProxy: TrustProxy
  try { trustProxy = parseTrustProxy(raw.TRUST_PROXY) } catch (err) {
    throw new CORE_INVALID_CONFIG('TRUST_PROXY', (err as Error).message)
  }
  const host = raw.HOST.trim()
  // Open mode is for development: without an explicit HOST it stays off the network.
  const loopback = host === '' && !protectedMode(raw.MCP_API_KEY)
  return { host: host !== '' ? host : loopback ? '127.0.0.1' : '0.0.0.0', hostDefaultedToLoopback: loopback, trustProxy }
}

export function derivePublicBaseUrl (raw: RawConfig): string {
  const publicBaseUrl = (raw.PUBLIC_BASE_URL.trim() || 'http://computer-use-server:8081').replace(/\/+$/, '')
  let parsed: URL
  try { parsed = new URL(publicBaseUrl) } catch {
    throw new CORE_INVALID_CONFIG('PUBLIC_BASE_URL', `'${raw.PUBLIC_BASE_URL}' is not an absolute URL`)
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new CORE_INVALID_CONFIG('PUBLIC_BASE_URL', 'must be an http or https URL')
  }
  return publicBaseUrl
}

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]'])

/** OAUTH_* and OIDC_*: what the authorization server needs to be safe (docs/contract.md#oauth). */
export function deriveOAuth (raw: RawConfig, publicBaseUrl: string): string[] {
  const allowed = raw.OIDC_ALLOWED_EMAILS.split(',').map(s => s.trim().toLowerCase()).filter(Boolean)
    .map(s => s === '*' || s.startsWith('@') || s.includes('@') ? s : `@${s}`)
  if (!raw.OAUTH_ENABLED) return allowed
  if (!protectedMode(raw.MCP_API_KEY)) throw new CORE_INVALID_CONFIG('OAUTH_ENABLED', 'needs MCP_API_KEY: without it /mcp is open and tokens would protect nothing')
  if (raw.SINGLE_USER_MODE.trim().toLowerCase() === 'true') {
    throw new CORE_INVALID_CONFIG('SINGLE_USER_MODE', 'true puts every caller in the one shared chat `default`, so with OAUTH_ENABLED=true every person who signs in would share one computer and its files; set SINGLE_USER_MODE to false or leave it empty (each OAuth user then gets a computer of their own), or turn OAUTH_ENABLED off')
  }
  const url = new URL(publicBaseUrl)
  if (url.protocol !== 'https:' && !LOOPBACK_HOSTS.has(url.hostname)) {
    throw new CORE_INVALID_CONFIG('PUBLIC_BASE_URL', `OAuth needs an https URL (${publicBaseUrl}): sign-in pages and tokens must not travel in clear text; http is accepted only for 127.0.0.1, localhost and [::1]`)
  }
  const issuer = raw.OIDC_ISSUER.trim()
  if (issuer === '') {
    if (!raw.OAUTH_KEY_LOGIN) throw new CORE_INVALID_CONFIG('OAUTH_KEY_LOGIN', 'false leaves no way to sign in: set OIDC_ISSUER too')
    return allowed
  }
  let parsed: URL
  try { parsed = new URL(issuer) } catch { throw new CORE_INVALID_CONFIG('OIDC_ISSUER', `'${issuer}' is not an absolute URL`) }
  if (parsed.protocol !== 'https:' && !(parsed.protocol === 'http:' && LOOPBACK_HOSTS.has(parsed.hostname))) {
    throw new CORE_INVALID_CONFIG('OIDC_ISSUER', 'must be an https URL (http only on loopback)')
  }
  if (raw.OIDC_CLIENT_ID.trim() === '') throw new CORE_INVALID_CONFIG('OIDC_CLIENT_ID', 'is required with OIDC_ISSUER')
  if (allowed.length === 0) throw new CORE_INVALID_CONFIG('OIDC_ALLOWED_EMAILS', 'is required with OIDC_ISSUER: list emails and @domains, or * for every account of the issuer')
  return allowed
}

const GIB = 1024 ** 3

/** The machine the auto pool size is scaled to: CPUs and memory (a cgroup limit when lower than the RAM). */
export function machine (): { cpus: number, memory: number } {
  const limit = process.constrainedMemory?.() ?? 0
  const ram = totalmem()
  return { cpus: availableParallelism(), memory: limit > 0 && limit < ram ? limit : ram }
}

/**
 * SANDBOX_POOL_SIZE: a number, or auto = min(2, CPUs, memory / 2 GiB): a warm sandbox is a started one
 * (idle, it holds little memory, but a claimed one runs a chat's commands), so a small machine keeps fewer.
 */
export function derivePoolSize (value: string, m: { cpus: number, memory: number } = machine()): number {
  if (value !== 'auto') return Number(value)
  return Math.max(0, Math.min(2, m.cpus, Math.floor(m.memory / (2 * GIB))))
}

/** The user skill cache as the Docker daemon sees it: explicit, else moved along with DATA_DIR_HOST. */
export function skillsCacheHost (raw: RawConfig): string {
  const explicit = raw.SKILLS_CACHE_HOST_PATH.trim()
  if (explicit !== '') return explicit
  const dataDir = raw.DATA_DIR.replace(/\/+$/, '')
  const dataHost = (raw.DATA_DIR_HOST.trim() || raw.DATA_DIR).replace(/\/+$/, '')
  const cache = raw.SKILLS_CACHE_DIR.trim() || `${dataDir}/skills-cache`
  return cache === dataDir || cache.startsWith(`${dataDir}/`) ? dataHost + cache.slice(dataDir.length) : cache
}

/**
 * MCP_TOKENS_URL_ALLOW as serialised origins: each entry an http(s) origin, nothing more (a path,
 * query or user info would suggest a match narrower or different from what is compared).
 */
export function settingsOrigins (raw: RawConfig): string[] {
  const out: string[] = []
  for (const entry of raw.MCP_TOKENS_URL_ALLOW.split(',').map(s => s.trim().replace(/\/+$/, '')).filter(Boolean)) {
    let url: URL | undefined
    try { url = new URL(entry) } catch {}
    if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.username !== '' || url.password !== '' ||
      url.pathname !== '/' || url.search !== '' || url.hash !== '') {
      throw new CORE_INVALID_CONFIG('MCP_TOKENS_URL_ALLOW', `'${entry}' is not an origin (scheme://host[:port], http or https, no path)`)
    }
    out.push(url.origin)
  }
  return out
}
