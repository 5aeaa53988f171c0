import { randomBytes } from 'node:crypto'
import * as oidc from 'openid-client'
import { validEmail } from '../../core/identity.js'
import { OAUTH_UPSTREAM_FAILED, OAUTH_UPSTREAM_REFUSED } from './errors.js'

/*
 * Sign-in through an upstream OpenID Connect provider (Google, Keycloak, GitHub through an OIDC
 * bridge…), with openid-client: authorization code + PKCE + nonce, ID token validated by the
 * library. The person is who the ID token (or userinfo) says by email, and only when that email is
 * allowed. The one adapter file for openid-client.
 */

export interface UpstreamOptions {
  issuer: string
  clientId: string
  /** Empty = public client (PKCE only). */
  clientSecret: string
  /** `<PUBLIC>/oauth/upstream/callback`, registered at the upstream provider. */
  redirectUri: string
  /** Lowercase emails, `@domain` entries or `*`. */
  allowed: readonly string[]
  now?: () => number
}

export interface UpstreamIdentity { email: string, name?: string }

export interface Upstream {
  /** The upstream authorization URL for the interaction `uid`; remembers state, nonce and verifier. */
  start: (uid: string) => Promise<string>
  /**
   * Completes the upstream callback: validates state, code, ID token and the allowlist. Returns the
   * interaction to resume and a one-time ticket that `take` exchanges for the identity there (the
   * interaction cookie is path-bound to the interaction URL, so the login finishes on that path).
   * Throws OAUTH_UPSTREAM_REFUSED (403) for a person not allowed, OAUTH_UPSTREAM_FAILED (502) else.
   */
  finish: (callbackUrl: URL) => Promise<{ uid: string, ticket: string }>
  take: (uid: string, ticket: string) => UpstreamIdentity | undefined
}

interface Pending { uid: string, verifier: string, nonce: string, expires: number }
interface Done { uid: string, identity: UpstreamIdentity, expires: number }

const TTL_MS = 10 * 60_000
const MAX_PENDING = 1000

/** Whether an email is on the OIDC_ALLOWED_EMAILS list. */
export function emailAllowed (email: string, allowed: readonly string[]): boolean {
  const lower = email.toLowerCase()
  return allowed.includes('*') || allowed.includes(lower) || allowed.includes(lower.slice(lower.lastIndexOf('@')))
}

/** Adds to a bounded map: expired entries go first, then the oldest. */
function put<V extends { expires: number }> (map: Map<string, V>, key: string, value: V, now: number): void {
  for (const [k, v] of map) if (v.expires <= now) map.delete(k)
  while (map.size >= MAX_PENDING) map.delete(map.keys().next().value as string)
  map.set(key, value)
}

export function createUpstream (opts: UpstreamOptions): Upstream {
  const now = opts.now ?? Date.now
  const pending = new Map<string, Pending>()
  const done = new Map<string, Done>()
  let config: Promise<oidc.Configuration> | undefined
  const issuer = new URL(opts.issuer)

  // Discovered on first use, so an upstream outage never stops the boot; a failed discovery is retried.
  function discover (): Promise<oidc.Configuration> {
    config ??= oidc.discovery(issuer, opts.clientId, undefined,
      opts.clientSecret === '' ? oidc.None() : oidc.ClientSecretPost(opts.clientSecret),
      issuer.protocol === 'http:' ? { execute: [oidc.allowInsecureRequests] } : undefined
    ).catch((err: unknown) => { config = undefined; throw new OAUTH_UPSTREAM_FAILED('discovery', { cause: err }) })
    return config
  }

  async function identify (cfg: oidc.Configuration, tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>): Promise<UpstreamIdentity> {
    const claims = tokens.claims()
    if (claims === undefined) throw new OAUTH_UPSTREAM_FAILED('no ID token')
    let info: Record<string, unknown> = claims
    if (typeof claims.email !== 'string') info = await oidc.fetchUserInfo(cfg, tokens.access_token, claims.sub)
    const email = typeof info.email === 'string' ? validEmail(info.email.trim().toLowerCase()) : undefined
    if (email === undefined) throw new OAUTH_UPSTREAM_REFUSED('your account at the sign-in provider has no usable email address')
    if (info.email_verified === false) throw new OAUTH_UPSTREAM_REFUSED(`${email} is not verified at the sign-in provider`)
    if (!emailAllowed(email, opts.allowed)) throw new OAUTH_UPSTREAM_REFUSED(`${email} is not allowed on this server; ask its operator to add it to OIDC_ALLOWED_EMAILS`)
    const name = typeof info.name === 'string' && info.name.trim() !== '' ? info.name.trim() : undefined
    return name === undefined ? { email } : { email, name }
  }

  return {
    async start (uid) {
      const cfg = await discover()
      const verifier = oidc.randomPKCECodeVerifier()
      const state = oidc.randomState()
      const nonce = oidc.randomNonce()
      put(pending, state, { uid, verifier, nonce, expires: now() + TTL_MS }, now())
      return oidc.buildAuthorizationUrl(cfg, {
        redirect_uri: opts.redirectUri,
        scope: 'openid email profile',
        code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
        code_challenge_method: 'S256',
        state,
        nonce
      }).href
    },
    async finish (callbackUrl) {
      const state = callbackUrl.searchParams.get('state') ?? ''
      const entry = pending.get(state)
      pending.delete(state)
      if (entry === undefined || entry.expires <= now()) throw new OAUTH_UPSTREAM_FAILED('unknown or expired sign-in attempt')
      const upstreamError = callbackUrl.searchParams.get('error')
      if (upstreamError !== null) throw new OAUTH_UPSTREAM_REFUSED(`the sign-in provider answered ${upstreamError.slice(0, 100)}`)
      const cfg = await discover()
      let tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>
      try {
        tokens = await oidc.authorizationCodeGrant(cfg, callbackUrl, { pkceCodeVerifier: entry.verifier, expectedState: state, expectedNonce: entry.nonce, idTokenExpected: true })
      } catch (err) { throw new OAUTH_UPSTREAM_FAILED('code exchange', { cause: err }) }
      const identity = await identify(cfg, tokens)
      const ticket = randomBytes(24).toString('base64url')
      put(done, ticket, { uid: entry.uid, identity, expires: now() + TTL_MS }, now())
      return { uid: entry.uid, ticket }
    },
    take (uid, ticket) {
      const entry = done.get(ticket)
      if (entry === undefined || entry.uid !== uid || entry.expires <= now()) return undefined
      done.delete(ticket)
      return entry.identity
    }
  }
}
