import type { ChatScope } from './auth.js'

/*
 * The one definition of the capability token shape (docs/contract.md#capability-tokens, docs/contract.md#url-shapes) and of how tokens are
 * kept out of logs. Plugins that mint, verify or strip tokens use these instead of their own copies.
 */

/** A whole capability token `v1.<scope>.<exp>.<sig>`: groups scope, exp (Unix seconds), sig (22 base64url chars). */
export const CAPABILITY_TOKEN = /^v1\.([fc])\.([0-9]{1,12})\.([A-Za-z0-9_-]{22})$/

/** A path segment `~<token>` (the files base of docs/contract.md#url-shapes): always a token, never a file name. */
export const TOKEN_PATH_SEGMENT = /^~v1\.[fc]\.[0-9]{1,12}\.[A-Za-z0-9_-]{22}$/

export interface ParsedToken { scope: ChatScope, exp: number, sig: string }

/** Splits a token into its fields; null when the string does not have the exact shape. */
export function parseCapabilityToken (token: string): ParsedToken | null {
  const m = CAPABILITY_TOKEN.exec(token)
  if (m === null) return null
  return { scope: m[1] as ChatScope, exp: Number(m[2]), sig: m[3] as string }
}

/** The token of a `~<token>` path segment, or undefined when the segment is not one. */
export function tokenOfPathSegment (segment: string): string | undefined {
  return TOKEN_PATH_SEGMENT.test(segment) ? segment.slice(1) : undefined
}

// Loose shape for redaction: case-insensitive, any length of digits and signature, so that a
// mangled or truncated token is hidden too. No nested quantifiers: linear on any input.
const TOKEN_LIKE = /v1\.[fc]\.[0-9]+\.[A-Za-z0-9_-]{8}/i
const PERCENT = /%([0-9A-Fa-f]{2})/g
const MAX_DECODE_ROUNDS = 3
const REDACTED = '[redacted]'

/**
 * Percent-decodes up to three times (so `%257E` is seen as `~`), byte by byte and without
 * throwing on malformed sequences: what matters here is what a token looks like after any
 * decoding a client, proxy or reader might apply, not valid UTF-8.
 */
function decodeForRedaction (raw: string): string {
  let text = raw.replace(/\+/g, ' ')
  for (let i = 0; i < MAX_DECODE_ROUNDS && text.includes('%'); i++) {
    const next = text.replace(PERCENT, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)))
    if (next === text) break
    text = next
  }
  return text
}

/** A path segment as it may be logged: hidden when it is, or decodes to, a `~` segment or anything token-shaped. */
function redactSegment (segment: string): string {
  if (segment === '') return segment
  const decoded = decodeForRedaction(segment)
  if (decoded.startsWith('~') || TOKEN_LIKE.test(decoded)) return decoded.startsWith('~') ? `~${REDACTED}` : REDACTED
  return segment
}

/** A `name=value` query pair as it may be logged: the `t` parameter (any encoding or case) and token-shaped values are hidden. */
function redactPair (pair: string): string {
  const eq = pair.indexOf('=')
  const name = eq === -1 ? pair : pair.slice(0, eq)
  const value = eq === -1 ? '' : pair.slice(eq + 1)
  if (decodeForRedaction(name).trim().toLowerCase() === 't') return `${name}=${REDACTED}`
  if (TOKEN_LIKE.test(decodeForRedaction(value)) || TOKEN_LIKE.test(decodeForRedaction(name))) return eq === -1 ? REDACTED : `${name}=${REDACTED}`
  return pair
}

/**
 * The URL of a request as it may be logged (docs/contract.md#general-http-rules): `~token` path segments, the `t`
 * query parameter and anything token-shaped are redacted after percent-decoding, so `%7E`,
 * `%2E`, `?%74=` and `?T=` spellings are caught as well. Linear in the URL length (which Node
 * bounds by its header size limit).
 */
export function redactUrl (url: string): string {
  const q = url.indexOf('?')
  const path = q === -1 ? url : url.slice(0, q)
  const safePath = path.split('/').map(redactSegment).join('/')
  if (q === -1) return safePath
  const safeQuery = url.slice(q + 1).split('&').map(redactPair).join('&')
  return `${safePath}?${safeQuery}`
}
