import { createHash, timingSafeEqual } from 'node:crypto'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { CORE_FORBIDDEN, CORE_TOO_MANY_FAILURES, CORE_UNAUTHORIZED } from './errors.js'

/** What a chat route needs: `f` read-only files, `c` full control (surface.md §6.1). */
export type ChatScope = 'f' | 'c'

/** Outcome of a token check by a verifier another plugin registers (capability links). */
export type TokenVerdict = 'ok' | 'forbidden' | 'not-mine'
export type TokenVerifier = (token: string, chatId: string, scope: ChatScope) => TokenVerdict

export interface AuthService {
  /** True when MCP_API_KEY is set: every /mcp request and every chat route needs credentials. */
  readonly protectedMode: boolean
  /** Constant-time comparison of a presented secret with MCP_API_KEY (SHA-256 digests, timingSafeEqual). */
  isApiKey (presented: string | undefined): boolean
  /** The token of an `Authorization: Bearer <token>` header; the scheme word is case-insensitive. */
  bearer (request: FastifyRequest): string | undefined
  /**
   * Requires the API key (protected mode). Throws CORE_UNAUTHORIZED (401) or CORE_TOO_MANY_FAILURES (429).
   * In open mode it always passes.
   */
  requireApiKey (request: FastifyRequest, reply: FastifyReply): Promise<void>
  /**
   * Authorises a chat route: API key, or a capability token for this chat and scope from the
   * Authorization header, the `t` query parameter or `pathToken` (the `~token` path form).
   * Missing → 401, wrong chat/scope/expired/tampered → 403 (§6.1 item 3). Returns the token used, if any.
   */
  authorizeChat (request: FastifyRequest, chatId: string, scope: ChatScope, pathToken?: string): string | undefined
  /** Registered by the plugin that mints capability tokens, while plugins load. */
  addTokenVerifier (verifier: TokenVerifier): void
}

const digest = (s: string): Buffer => createHash('sha256').update(s, 'utf8').digest()

export interface AuthOptions {
  apiKey: string
  /** Failed attempts per client address and minute before 429. */
  maxFailuresPerMinute?: number
}

export function createAuthService (opts: AuthOptions): AuthService {
  const keyDigest = opts.apiKey === '' ? null : digest(opts.apiKey)
  const verifiers: TokenVerifier[] = []
  const limit = opts.maxFailuresPerMinute ?? 30
  // Failure counts per address in the current minute; the map is cleared every minute so it stays bounded.
  let window = Math.floor(Date.now() / 60000)
  let failures = new Map<string, number>()

  function throttle (request: FastifyRequest, reply: FastifyReply | undefined): void {
    const now = Math.floor(Date.now() / 60000)
    if (now !== window) { window = now; failures = new Map() }
    if ((failures.get(request.ip) ?? 0) >= limit) {
      reply?.header('Retry-After', String(60 - Math.floor((Date.now() / 1000) % 60)))
      throw new CORE_TOO_MANY_FAILURES()
    }
  }
  function fail (request: FastifyRequest): void {
    if (failures.size > 100_000) failures.clear()
    failures.set(request.ip, (failures.get(request.ip) ?? 0) + 1)
  }

  const service: AuthService = {
    protectedMode: keyDigest !== null,
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
      if (keyDigest === null) return
      throttle(request, reply)
      if (service.isApiKey(service.bearer(request))) return
      fail(request)
      throw new CORE_UNAUTHORIZED()
    },
    authorizeChat (request, chatId, scope, pathToken) {
      if (keyDigest === null) return undefined
      throttle(request, undefined)
      const fromQuery = (request.query as Record<string, unknown> | undefined)?.t
      const candidates = [service.bearer(request), typeof fromQuery === 'string' ? fromQuery : undefined, pathToken]
        .filter((t): t is string => t !== undefined && t !== '')
      if (candidates.length === 0) throw new CORE_UNAUTHORIZED()
      for (const token of candidates) {
        if (service.isApiKey(token)) return undefined
        for (const verify of verifiers) {
          if (verify(token, chatId, scope) === 'ok') return token
        }
      }
      fail(request)
      throw new CORE_FORBIDDEN('the credential does not grant this access to this chat')
    },
    addTokenVerifier (verifier) { verifiers.push(verifier) }
  }
  return service
}
