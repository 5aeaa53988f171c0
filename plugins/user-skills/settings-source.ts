/*
 * Which settings service a request's skills come from. The operator's MCP_TOKENS_URL and
 * MCP_TOKENS_API_KEY, unless the request brings the X-Mcp-Tokens-Url / X-Mcp-Tokens-Api-Key pair and
 * may use it: the caller is authenticated (the API key, or an OAuth token) and the URL's origin is
 * MCP_TOKENS_URL's own or one of MCP_TOKENS_URL_ALLOW, compared as serialised origins after parsing
 * (so `https://good.example.evil.com`, `https://good.example@evil.com` or another port never match).
 * Without both checks any caller could make the server GET an address of its choice, from inside
 * the operator's network, and download, extract and keep whatever ZIPs the answer lists. A refused
 * pair is ignored as a whole (the request gets the operator's service) and logged once per origin.
 */
import { createHash } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import QuickLRU from 'quick-lru'
import type { RequestCredentials } from '../../core/identity.js'

/** Where a lookup goes. `id` separates caches of different services (and keys) for one email. */
export interface SettingsSource { url: string, apiKey: string, id: string }

export interface SourcePolicyOptions {
  /** MCP_TOKENS_URL; empty = no settings service of the operator's. */
  url: string
  /** MCP_TOKENS_API_KEY */
  apiKey: string
  /** MCP_TOKENS_URL_ALLOW: origins (scheme://host[:port]) a caller's URL may point at, besides MCP_TOKENS_URL's. */
  allow: readonly string[]
  /** Distinct refusals remembered so that each is logged once (oldest forgotten first). */
  maxLogged?: number
}

/** Why a request's pair was not used. */
type Refusal = 'not authenticated' | 'not an http(s) URL without user info' | 'origin not allowed'

/**
 * The serialised origin of an http(s) URL without user info (fetch refuses those, and they are a
 * classic way to make a URL look like another host); undefined for anything else.
 */
export function settingsOrigin (raw: string): string | undefined {
  let url: URL
  try { url = new URL(raw.trim()) } catch { return undefined }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined
  if (url.username !== '' || url.password !== '') return undefined
  return url.origin
}

function sourceOf (url: string, apiKey: string): SettingsSource {
  const id = createHash('sha256').update(`${url}\u0000${apiKey}`).digest('hex').slice(0, 16)
  return { url, apiKey, id }
}

/** The request's settings source under the policy above; undefined = no settings service at all. */
export type SourcePolicy = (credentials?: RequestCredentials) => SettingsSource | undefined

export function createSourcePolicy (opts: SourcePolicyOptions, log: FastifyBaseLogger): SourcePolicy {
  const configuredUrl = opts.url.trim().replace(/\/+$/, '')
  const configured = configuredUrl === '' ? undefined : sourceOf(configuredUrl, opts.apiKey)
  const allowed = new Set<string>()
  for (const entry of opts.allow) {
    const origin = settingsOrigin(entry)
    if (origin === undefined) throw new TypeError(`MCP_TOKENS_URL_ALLOW entry '${entry}' is not an http(s) origin`)
    allowed.add(origin)
  }
  const own = settingsOrigin(configuredUrl)
  if (own !== undefined) allowed.add(own)
  // Bounded: a caller inventing origins costs one log line each, never memory.
  const logged = new QuickLRU<string, true>({ maxSize: opts.maxLogged ?? 256 })

  function refuse (why: Refusal, origin: string): SettingsSource | undefined {
    const key = `${why}\u0000${origin}`
    if (!logged.has(key)) {
      logged.set(key, true)
      // The origin only: a path or query may carry a secret, and the key never reaches a log.
      log.warn({ origin, reason: why }, 'ignoring a request\'s settings-service headers (X-Mcp-Tokens-Url / -Api-Key); logged once per origin')
    }
    return configured
  }

  return credentials => {
    const apiKey = credentials?.mcpTokensApiKey
    if (apiKey === undefined) return configured
    const raw = credentials?.mcpTokensUrl
    const origin = raw === undefined ? own ?? '(none)' : settingsOrigin(raw) ?? '(invalid)'
    if (credentials?.mcpTokensCaller === undefined) return refuse('not authenticated', origin)
    // The key alone only replaces the operator's key for the operator's service.
    if (raw === undefined) return configured === undefined ? undefined : sourceOf(configured.url, apiKey)
    if (origin === '(invalid)') return refuse('not an http(s) URL without user info', origin)
    if (!allowed.has(origin)) return refuse('origin not allowed', origin)
    // Query and fragment dropped: the path is all a settings URL needs.
    const url = new URL(raw.trim())
    return sourceOf(`${url.origin}${url.pathname}`.replace(/\/+$/, ''), apiKey)
  }
}
