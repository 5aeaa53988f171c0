import { createHash, timingSafeEqual } from 'node:crypto'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { CORE_FORBIDDEN, CORE_TOO_MANY_FAILURES, CORE_UNAUTHORIZED } from './errors.js'
import { createFailureThrottle } from './failure-throttle.js'
import { protectedMode } from './config-derive.js'
import type { Principal, TokenUser } from './identity.js'

/** What a chat route needs: `f` read-only files, `c` full control (docs/contract.md#capability-tokens). */
export type ChatScope = 'f' | 'c'

/** Outcome of a token check by a verifier another plugin registers (capability links). */
export type TokenVerdict = 'ok' | 'forbidden' | 'not-mine'
export type TokenVerifier = (token: string, chatId: string, scope: ChatScope) => TokenVerdict

/**
 * A second kind of bearer token for some routes, registered by a plugin while plugins load (the
 * OAuth authorization server for /mcp, docs/contract.md#oauth). The static key keeps working beside it.
 */
export interface BearerVerifier {
  /** Route URLs exactly as registered (`request.routeOptions.url`, e.g. '/mcp' and '/mcp/') where these tokens count. */
  routes: readonly string[]
  /**
   * The user of a token that is valid for this resource right now, else undefined (unknown,
   * expired, revoked, issued for another audience). It must not throw for a bad token.
   */
  verify: (token: string) => Promise<TokenUser | undefined>
  /** Auth-params of the `WWW-Authenticate: Bearer` challenge on 401 answers of those routes (RFC 9728 `resource_metadata`). */
  challenge: Readonly<Record<string, string>>
}

/**
 * The credential checks. Routes call them through core's route kit (core/route-kit.ts), which
 * records what they proved in `request.principal`; the checks themselves record nothing on the request.
 */
export interface AuthService {
  /** True when MCP_API_KEY is set: every /mcp request and every chat route needs credentials. */
  readonly protectedMode: boolean
  /** Constant-time comparison of a presented secret with MCP_API_KEY (SHA-256 digests, timingSafeEqual). */
  isApiKey (presented: string | undefined): boolean
  /** The token of an `Authorization: Bearer <token>` header; the scheme word is case-insensitive. */
  bearer (request: FastifyRequest): string | undefined
  /**
   * Requires the API key as a Bearer header (protected mode) and returns who presented it: a valid
   * key always passes (`{ kind: 'key' }`); on routes a BearerVerifier claims, a token it accepts
   * passes too and its user is the principal (core/identity.ts: readUser, resolveMcpChat). A missing
   * or wrong credential throws CORE_UNAUTHORIZED (401), or CORE_TOO_MANY_FAILURES (429 with
   * Retry-After) once the client address has more than 30 failures this minute. In open mode it
   * always passes, with no principal (null).
   */
  requireApiKey (request: FastifyRequest, reply: FastifyReply): Promise<Principal | null>
  /**
   * For a route that serves callers without credentials too: true when the request carries
   * MCP_API_KEY as a Bearer header (the route kit then records the key as its principal, so
   * readUser knows the caller). Never throws and counts no failure; false in open mode.
   */
  noteApiKey (request: FastifyRequest): boolean
  /**
   * Authorises a chat route: the API key as a Bearer header, or a capability token for this chat
   * and scope from the Authorization header, the `t` query parameter or `pathToken` (the `~token`
   * path form). The API key in `t` or a path is not accepted (docs/contract.md#capability-tokens). Missing → 401, wrong
   * chat/scope/expired/tampered → 403 (docs/contract.md#capability-tokens), both counted as failures of the client
   * address and answered 429 (Retry-After carried by the error's `headers`) over the limit.
   * Valid credentials are never throttled. Returns the capability token used; undefined for the API
   * key and in open mode (the route kit tells them apart by protectedMode).
   */
  authorizeChat (request: FastifyRequest, chatId: string, scope: ChatScope, pathToken?: string): string | undefined
  /** Registered by the plugin that mints capability tokens, while plugins load. */
  addTokenVerifier (verifier: TokenVerifier): void
  /** Registered by a plugin that issues bearer tokens for some routes (OAuth for /mcp), while plugins load. */
  addBearerVerifier (verifier: BearerVerifier): void
  /**
   * The `WWW-Authenticate` value of a 401 answer to this request: `Bearer`, and on a route a
   * verifier claims its auth-params plus `error="invalid_token"` when a token other than the key
   * was presented (RFC 6750 section 3.1). Core sets it on every 401 reply (core/app.ts, onSend), so routes
   * that answer 401 themselves need not know about OAuth.
   */
  challenge (request: FastifyRequest): string
}

/** The principal of a request that presented MCP_API_KEY; shared, never changed. */
export const KEY: Principal = Object.freeze({ kind: 'key' })

const digest = (s: string): Buffer => createHash('sha256').update(s, 'utf8').digest()

export interface AuthOptions {
  apiKey: string
  /** Failed attempts per client address and minute that are answered normally; the next ones get 429. */
  maxFailuresPerMinute?: number
  /** Injectable clock (ms) for tests. */
  now?: () => number
}

export function createAuthService (opts: AuthOptions): AuthService {
  const keyDigest = opts.apiKey === '' ? null : digest(opts.apiKey)
  const verifiers: TokenVerifier[] = []
  const bearerVerifiers = new Map<string, BearerVerifier>()
  const claimedBy = (request: FastifyRequest): BearerVerifier | undefined => {
    const url = request.routeOptions.url
    return url === undefined ? undefined : bearerVerifiers.get(url)
  }
  const throttle = createFailureThrottle({ limit: opts.maxFailuresPerMinute ?? 30, now: opts.now ?? Date.now })

  // Called only after the credential failed: counts the failure and answers 429 once the
  // address is over its limit, else the given 401/403. A valid credential never gets here.
  function refuse (request: FastifyRequest, reply: FastifyReply | undefined, err: Error): never {
    const verdict = throttle.fail(request.ip)
    if (!verdict.throttled) throw err
    if (verdict.firstThrottled) request.log.warn({ remoteAddress: request.ip }, 'failed authentication attempts throttled')
    const retryAfter = String(verdict.retryAfter)
    reply?.header('Retry-After', retryAfter)
    throw Object.assign(new CORE_TOO_MANY_FAILURES(), { headers: { 'retry-after': retryAfter } })
  }

  const service: AuthService = {
    protectedMode: protectedMode(opts.apiKey),
    isApiKey (presented) {
      if (keyDigest === null || presented === undefined) return false
      return timingSafeEqual(digest(presented), keyDigest)
    },
    bearer (request) {
      const header = request.headers.authorization
      if (typeof header !== 'string') return undefined
      const m = /^\s*bearer\s+(\S+)\s*$/i.exec(header)
      return m?.[1]
    },
    async requireApiKey (request, reply) {
      if (keyDigest === null) return null
      const token = service.bearer(request)
      if (service.isApiKey(token)) return KEY
      const verifier = claimedBy(request)
      const user = verifier === undefined || token === undefined ? undefined : await verifier.verify(token)
      if (user !== undefined) return { ...user, kind: 'user' }
      refuse(request, reply, new CORE_UNAUTHORIZED())
    },
    noteApiKey (request) {
      return service.isApiKey(service.bearer(request))
    },
    authorizeChat (request, chatId, scope, pathToken) {
      if (keyDigest === null) return undefined
      const bearer = service.bearer(request)
      // The master key only ever travels in the Authorization header (docs/contract.md#capability-tokens): in a URL it would end
      // up in browser history, proxies and Referer-less logs of other servers.
      if (service.isApiKey(bearer)) return undefined
      const fromQuery = (request.query as Record<string, unknown> | undefined)?.t
      const candidates = [bearer, typeof fromQuery === 'string' ? fromQuery : undefined, pathToken]
        .filter((t): t is string => t !== undefined && t !== '')
      if (candidates.length === 0) refuse(request, undefined, new CORE_UNAUTHORIZED())
      for (const token of candidates) {
        for (const verify of verifiers) {
          if (verify(token, chatId, scope) === 'ok') return token
        }
      }
      refuse(request, undefined, new CORE_FORBIDDEN('the credential does not grant this access to this chat'))
    },
    addTokenVerifier (verifier) { verifiers.push(verifier) },
    addBearerVerifier (verifier) {
      for (const route of verifier.routes) bearerVerifiers.set(route, verifier)
    },
    challenge (request) {
      const verifier = claimedBy(request)
      if (verifier === undefined) return 'Bearer'
      const params: Record<string, string> = { ...verifier.challenge }
      const token = service.bearer(request)
      if (token !== undefined && !service.isApiKey(token)) params.error = 'invalid_token'
      const rendered = Object.entries(params).map(([k, v]) => `${k}="${v.replace(/["\\]/g, '\\$&')}"`)
      return rendered.length === 0 ? 'Bearer' : `Bearer ${rendered.join(', ')}`
    }
  }
  return service
}
