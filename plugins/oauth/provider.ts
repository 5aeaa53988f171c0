import { randomBytes } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import Provider, { errors, type Configuration, type KoaContextWithOIDC } from 'oidc-provider'
import type { TokenUser } from '../../core/identity.js'
import type { OAuthKeys } from './keys.js'
import type { OAuthStore } from './store.js'
import { renderErrorPage } from './pages.js'
import { isMetadataDocumentClient, redirectHostsProblem } from './destination.js'
import { clientMetadataConfiguration, type ClientMetadataOptions } from './client-metadata.js'

/*
 * The one file that configures oidc-provider (a certified OpenID/OAuth implementation; docs/contract.md#oauth
 * asks for a kept library instead of hand-rolled token crypto). Everything else of the plugin talks
 * to `AuthorizationServer`. The profile is OAuth 2.1 as MCP clients use it: authorization code with
 * PKCE S256 for every client, open dynamic registration (RFC 7591) and Client ID Metadata Documents
 * (client-metadata.ts), opaque access tokens bound to the one resource `<PUBLIC>/mcp` (RFC 8707),
 * rotating refresh tokens, revocation (RFC 7009).
 */

import { SCOPE } from './schemas.js'
export { SCOPE }
const YEAR_S = 365 * 24 * 3600

export interface ServerOptions {
  /** PUBLIC_BASE_URL without trailing slash: the issuer identifier. */
  issuer: string
  /** The protected resource, `<PUBLIC>/mcp`: the audience of every access token. */
  resource: string
  /** Path below the public base where the provider's endpoints live, e.g. '/oauth'. */
  prefix: string
  accessTokenTtlS: number
  refreshTokenTtlS: number
  /** Name and email of a subject, for ID token claims. */
  account: (subject: string) => TokenUser
  /** Largest accepted registration request (client metadata) as JSON, in bytes. */
  maxClientMetadataBytes: number
  /** Client ID Metadata Documents: fetch budget, size and test overrides (the client address comes from `handle`). */
  clientMetadata: Omit<ClientMetadataOptions, 'addressOf'>
}

export interface AuthorizationServer {
  readonly provider: Provider
  /**
   * Hands a raw request to the provider; `innerUrl` is the path below the prefix ('/token',
   * '/.well-known/openid-configuration'), `clientAddress` the request's address as fastify sees it (trusted proxies applied).
   */
  handle: (req: IncomingMessage, res: ServerResponse, innerUrl: string, clientAddress: string) => Promise<void>
  /** The subject of a live access token for our resource whose grant and client still exist. */
  verifyAccessToken: (token: string) => Promise<string | undefined>
}

/**
 * Refuses a registration request (RFC 7591 errors) whose metadata is over `maxBytes` of JSON
 * (invalid_client_metadata) or whose redirect URIs span more than one host (invalid_redirect_uri).
 */
export function checkRegistration (body: unknown, maxBytes: number): void {
  const size = Buffer.byteLength(JSON.stringify(body ?? {}), 'utf8')
  if (size > maxBytes) throw new errors.InvalidClientMetadata(`client metadata is ${size} bytes of JSON; at most ${maxBytes} are accepted`)
  const problem = redirectHostsProblem((body as { redirect_uris?: unknown } | undefined)?.redirect_uris)
  // A description starting with redirect_uris makes the error invalid_redirect_uri (RFC 7591 section 3.2.2).
  if (problem !== undefined) throw new errors.InvalidClientMetadata(problem)
}

// A resource indicator names our resource with or without a trailing slash (what a user typed into Claude).
const sameResource = (indicator: string, resource: string): boolean => indicator.replace(/\/+$/, '') === resource

function configuration (store: OAuthStore, keys: OAuthKeys, opts: ServerOptions, addressOf: (req: IncomingMessage) => string): Configuration {
  const basePath = new URL(opts.issuer).pathname.replace(/\/+$/, '')
  const { feature: clientIdMetadataDocument, ...outbound } = clientMetadataConfiguration({ ...opts.clientMetadata, addressOf })
  return {
    ...outbound,
    adapter: (name: string) => store.adapterFor(name),
    jwks: { keys: keys.jwks as NonNullable<Configuration['jwks']>['keys'] },
    cookies: { keys: keys.cookieKeys, long: { httpOnly: true, sameSite: 'lax' }, short: { httpOnly: true, sameSite: 'lax' } },
    async findAccount (_ctx, sub) {
      const { email, name } = opts.account(sub)
      return { accountId: sub, claims: async () => ({ sub, ...(email === undefined ? {} : { email, email_verified: true }), ...(name === undefined ? {} : { name }) }) }
    },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
    scopes: ['openid', 'offline_access', SCOPE],
    responseTypes: ['code'],
    pkce: { required: () => true },
    clientDefaults: { grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' },
    clientAuthMethods: ['none', 'client_secret_basic', 'client_secret_post'],
    features: {
      devInteractions: { enabled: false },
      // Tokens are bearer tokens: /mcp checks no DPoP proofs, so none may be bound to a key.
      dPoP: { enabled: false },
      registration: {
        enabled: true,
        initialAccessToken: false,
        issueRegistrationAccessToken: false,
        // Called once per registration request, after its body is parsed and before the client is built
        // or stored: the one hook where oidc-provider lets a registration be refused with an RFC 7591 error.
        idFactory: (ctx: KoaContextWithOIDC) => {
          checkRegistration((ctx.oidc as unknown as { body?: unknown }).body, opts.maxClientMetadataBytes)
          return randomBytes(16).toString('base64url')
        }
      },
      clientIdMetadataDocument,
      revocation: { enabled: true },
      userinfo: { enabled: false },
      introspection: { enabled: false },
      resourceIndicators: {
        enabled: true,
        // Clients that predate RFC 8707 still get tokens for /mcp, and nothing else exists here.
        defaultResource: async () => opts.resource,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (_ctx, indicator) => {
          if (!sameResource(indicator, opts.resource)) throw new errors.InvalidTarget(`this server issues tokens only for ${opts.resource}`)
          return { scope: SCOPE, audience: opts.resource, accessTokenTTL: opts.accessTokenTtlS, accessTokenFormat: 'opaque' }
        }
      }
    },
    // Tokens outlive the browser session at this server: the connector stays connected.
    expiresWithSession: async () => false,
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    rotateRefreshToken: true,
    ttl: {
      AccessToken: opts.accessTokenTtlS,
      AuthorizationCode: 60,
      IdToken: 3600,
      Interaction: 15 * 60,
      Session: 24 * 3600,
      RefreshToken: opts.refreshTokenTtlS,
      // The grant bounds the whole life of a connection, rotations included.
      Grant: YEAR_S
    },
    interactions: { url: async (_ctx, interaction) => `${basePath}${opts.prefix}/interaction/${interaction.uid}` },
    routes: {
      authorization: '/authorize',
      token: '/token',
      registration: '/register',
      revocation: '/revoke',
      jwks: '/jwks',
      end_session: '/logout'
    },
    async renderError (ctx: KoaContextWithOIDC, out) {
      ctx.type = 'html'
      ctx.set('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
      ctx.body = renderErrorPage(String(out.error), typeof out.error_description === 'string' ? out.error_description : '')
    }
  }
}

/**
 * RFC 6749 section 3.3: an authorization request without a scope gets the default, the one scope of
 * the resource (MCP clients send none when the server's challenge names none); oidc-provider would
 * grant nothing and answer access_denied. Set before the provider sees the request, so it is part of
 * the interaction's stored parameters.
 */
function withDefaultScope (innerUrl: string): string {
  const q = innerUrl.indexOf('?')
  if ((q < 0 ? innerUrl : innerUrl.slice(0, q)) !== '/authorize') return innerUrl
  const params = new URLSearchParams(q < 0 ? '' : innerUrl.slice(q + 1))
  if ((params.get('scope') ?? '') !== '') return innerUrl
  params.set('scope', SCOPE)
  return `/authorize?${params.toString()}`
}

export function createAuthorizationServer (store: OAuthStore, keys: OAuthKeys, opts: ServerOptions): AuthorizationServer {
  // The address of each request in the provider's hands, for the metadata fetch budget.
  const addresses = new WeakMap<IncomingMessage, string>()
  const addressOf = (req: IncomingMessage): string => addresses.get(req) ?? req.socket.remoteAddress ?? ''
  const provider = new Provider(opts.issuer, configuration(store, keys, opts, addressOf))
  const publicUrl = new URL(opts.issuer)
  const mountPath = `${publicUrl.pathname.replace(/\/+$/, '')}${opts.prefix}`
  // URLs in metadata and redirects come from PUBLIC_BASE_URL, never from the request's Host (docs/contract.md#general-http-rules):
  // the provider (a Koa app) is told, through the proxy headers it trusts, exactly that origin.
  provider.proxy = true
  const callback = provider.callback()

  return {
    provider,
    async handle (req, res, raw, clientAddress) {
      addresses.set(req, clientAddress)
      const innerUrl = req.method === 'GET' ? withDefaultScope(raw) : raw
      req.headers.host = publicUrl.host
      req.headers['x-forwarded-host'] = publicUrl.host
      req.headers['x-forwarded-proto'] = publicUrl.protocol.slice(0, -1)
      // oidc-provider derives its mount path from originalUrl minus url.
      ;(req as IncomingMessage & { originalUrl?: string }).originalUrl = `${mountPath}${innerUrl}`
      req.url = innerUrl
      await new Promise<void>((resolve, reject) => {
        res.once('close', resolve)
        res.once('error', reject)
        callback(req, res)
      })
    },
    async verifyAccessToken (token) {
      // Opaque tokens are 43 base64url characters; anything else is not worth a lookup.
      if (!/^[A-Za-z0-9_-]{20,128}$/.test(token)) return undefined
      const at = await provider.AccessToken.find(token)
      if (at === undefined || at.isExpired) return undefined
      const audience = Array.isArray(at.aud) ? at.aud : [at.aud]
      if (!audience.includes(opts.resource) || !at.scopes.has(SCOPE)) return undefined
      // A revoked grant or a deleted client ends its tokens at once, not when they expire. A client of
      // a metadata document is never stored (nothing to delete) and is not looked up here: that would
      // fetch its document again on /mcp whenever the cache entry expired.
      if (at.grantId === undefined || await provider.Grant.find(at.grantId) === undefined) return undefined
      if (at.clientId === undefined) return undefined
      if (!isMetadataDocumentClient(at.clientId) && await provider.Client.find(at.clientId) === undefined) return undefined
      return at.accountId
    }
  }
}
