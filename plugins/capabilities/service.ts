import { createHmac, scryptSync, timingSafeEqual } from 'node:crypto'
import type { ChatScope } from '../../core/auth.js'
import { MIN_KEY_LENGTH } from '../../core/config.js'
import { parseCapabilityToken } from '../../core/tokens.js'
import type { LinkService } from './types.js'

export interface LinkServiceOptions {
  apiKey: string
  signingKey: string
  tokenTtlSeconds: number
  publicBaseUrl: string
  /** Injectable clock (ms) for tests. */
  now?: () => number
}

const DAY = 86400

/*
 * The HMAC key of capability tokens: scrypt(secret, fixed versioned salt), 32 bytes.
 * scrypt rather than HKDF: a token the model sees is an offline oracle for the secret, and a
 * 32-character minimum says nothing about entropy (a passphrase qualifies). HKDF would cost an
 * attacker one HMAC per guess; scrypt at N=2^15, r=8 costs ~0.1 s and 32 MiB per guess, paid by
 * us once at boot. The salt is fixed so restarts keep links valid; its version suffix changes
 * whenever the derivation does (which revokes every link, as rotating the key does).
 */
export const SIGNING_KEY_SALT = 'cubicle/link-signing/v2'
export const SIGNING_KEY_SCRYPT = { N: 2 ** 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 } as const

/**
 * Derives the token HMAC key from LINK_SIGNING_KEY, else MCP_API_KEY; null in open mode. A secret
 * under MIN_KEY_LENGTH throws (the boot refuses it earlier with a FATAL line; this guards integrators).
 */
export function deriveSigningKey (apiKey: string, signingKey: string): Buffer | null {
  if (apiKey === '') return null
  const secret = signingKey !== '' ? signingKey : apiKey
  if (secret.length < MIN_KEY_LENGTH) {
    throw new TypeError(`capabilities: ${signingKey !== '' ? 'LINK_SIGNING_KEY' : 'MCP_API_KEY'} must be at least ${MIN_KEY_LENGTH} characters`)
  }
  return scryptSync(secret, SIGNING_KEY_SALT, 32, SIGNING_KEY_SCRYPT)
}

/** Percent-encodes each `/`-separated segment of a relative path (RFC 3986 unreserved kept). */
export function encodePath (relPath: string): string {
  return relPath.split('/').filter(s => s !== '').map(s => encodeURIComponent(s).replace(/[!'()*]/g, c => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)).join('/')
}

export function createLinkService (opts: LinkServiceOptions): LinkService {
  const now = opts.now ?? Date.now
  // Derived once, here at boot: restarts keep links valid; rotating either key revokes every link (docs/contract.md#capability-tokens).
  const key = deriveSigningKey(opts.apiKey, opts.signingKey)
  const base = opts.publicBaseUrl.replace(/\/+$/, '')

  const sign = (scope: ChatScope, exp: number, chatId: string): string =>
    createHmac('sha256', key as Buffer).update(`v1|${scope}|${exp}|${chatId}`).digest().subarray(0, 16).toString('base64url')

  const service: LinkService = {
    publicBaseUrl: base,
    token (chatId, scope) {
      if (key === null) return undefined
      // Next UTC midnight after now + TTL: stable for a whole day, so cached prompts stay byte-identical.
      const exp = (Math.floor((Math.floor(now() / 1000) + opts.tokenTtlSeconds) / DAY) + 1) * DAY
      return `v1.${scope}.${exp}.${sign(scope, exp, chatId)}`
    },
    verify (token, chatId, scope) {
      if (key === null) return 'forbidden'
      const parsed = parseCapabilityToken(token)
      if (parsed === null) return 'forbidden'
      const { scope: tokenScope, exp } = parsed
      const expected = Buffer.from(sign(tokenScope, exp, chatId))
      const given = Buffer.from(parsed.sig)
      const valid = expected.length === given.length && timingSafeEqual(expected, given)
      if (!valid || exp * 1000 <= now()) return 'forbidden'
      return tokenScope === 'c' || scope === 'f' ? 'ok' : 'forbidden'
    },
    filesBase (chatId) {
      const t = service.token(chatId, 'f')
      return `${base}/files/${encodeURIComponent(chatId)}${t === undefined ? '' : `/~${t}`}`
    },
    fileUrl (chatId, relPath) { return `${service.filesBase(chatId)}/${encodePath(relPath)}` },
    filePath (chatId, relPath) { return service.fileUrl(chatId, relPath).slice(base.length) },
    archiveUrl (chatId) { return `${service.filesBase(chatId)}/archive` },
    previewUrl (chatId, scope = 'c') {
      const t = service.token(chatId, scope)
      return `${base}/preview/${encodeURIComponent(chatId)}${t === undefined ? '' : `?t=${t}`}`
    }
  }
  return service
}
