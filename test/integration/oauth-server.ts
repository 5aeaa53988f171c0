/*
 * Helpers of the OAuth integration tests (docs/contract.md#oauth): a server with OAUTH_ENABLED on a loopback
 * port that is also its PUBLIC_BASE_URL, an SDK OAuthClientProvider kept in memory, and the two
 * ways through the login page: real Chromium (the tests the issue names) and a cookie-keeping
 * fetch (protocol details, fast).
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import type { Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import type { Browser } from 'playwright-core'
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js'
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js'
import { buildApp, entry } from '../../core/app.js'
import { loadConfig } from '../../core/config.js'
import { entries, type PluginName } from '../../fastify.config.js'
import oauth from '../../plugins/oauth/index.js'
import type { OAuthOptions } from '../../plugins/oauth/schemas.js'
import { TEST_API_KEY } from '../helper.js'
import { removeByPrefix, TEST_IMAGE } from './docker.js'

export async function freePort (): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => { resolve(port) })
    })
  })
}

export interface OAuthServer { app: FastifyInstance, base: string, port: number, dataDir: string, prefix: string }

export interface StartOptions {
  env?: Record<string, string>
  /** Plugins besides oauth (default: transport and capabilities only, no Docker). */
  plugins?: PluginName[]
  /** Options of the oauth plugin over those the config gives (e.g. a lower login limit). */
  oauth?: Partial<OAuthOptions>
  /** Reuse a data dir and port (a restart). */
  dataDir?: string
  port?: number
}

/** Boots a server with OAuth on; closes it, its sandboxes and (unless given) its data dir in teardown. */
export async function startOAuthServer (t: Test, opts: StartOptions = {}): Promise<OAuthServer> {
  const port = opts.port ?? await freePort()
  const base = `http://127.0.0.1:${port}`
  const dataDir = opts.dataDir ?? await mkdtemp(join(tmpdir(), 'oauth-data-'))
  const prefix = `o-${randomBytes(4).toString('hex')}`
  const config = loadConfig({
    LOG_LEVEL: 'silent',
    DOCKER_IMAGE: TEST_IMAGE,
    SANDBOX_PREFIX: prefix,
    DATA_DIR: dataDir,
    PUBLIC_BASE_URL: base,
    MCP_API_KEY: TEST_API_KEY,
    OAUTH_ENABLED: 'true',
    ...opts.env
  })
  const names = opts.plugins ?? ['mcp-transport', 'capabilities']
  const list = [...entries(config, ['chat-storage', ...names]), entry(oauth, {
    enabled: true,
    publicBaseUrl: config.publicBaseUrl,
    keyLogin: config.OAUTH_KEY_LOGIN,
    accessTokenTtlS: config.OAUTH_ACCESS_TOKEN_TTL,
    refreshTokenTtlS: config.OAUTH_REFRESH_TOKEN_TTL,
    oidcIssuer: config.OIDC_ISSUER,
    oidcClientId: config.OIDC_CLIENT_ID,
    oidcClientSecret: config.OIDC_CLIENT_SECRET,
    oidcAllowedEmails: config.oidcAllowedEmails,
    ...opts.oauth
  })]
  const app = await buildApp(config, list, { logger: process.env.TEST_LOG === '1' ? { level: 'debug' } : false })
  t.teardown(async () => {
    await app.close()
    if (names.includes('sandbox-docker')) await removeByPrefix(prefix)
    if (opts.dataDir === undefined) await rm(dataDir, { recursive: true, force: true })
  })
  await app.listen({ port, host: '127.0.0.1' })
  return { app, base, port, dataDir, prefix }
}

/** An SDK OAuth client provider kept in memory; `authorize` plays the user's browser step. */
export class MemoryOAuthProvider implements OAuthClientProvider {
  client?: OAuthClientInformationMixed
  saved?: OAuthTokens
  verifier = ''
  /** Every authorization URL the SDK asked the user to open. */
  readonly authorizationUrls: URL[] = []

  constructor (readonly redirect: string, private readonly authorize: (url: URL) => Promise<void>, readonly name = 'SDK test client') {}

  get redirectUrl (): string { return this.redirect }
  get clientMetadata (): OAuthClientMetadata {
    return { client_name: this.name, redirect_uris: [this.redirect], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' }
  }

  clientInformation (): OAuthClientInformationMixed | undefined { return this.client }
  saveClientInformation (info: OAuthClientInformationMixed): void { this.client = info }
  tokens (): OAuthTokens | undefined { return this.saved }
  saveTokens (tokens: OAuthTokens): void { this.saved = tokens }
  async redirectToAuthorization (url: URL): Promise<void> {
    this.authorizationUrls.push(url)
    await this.authorize(url)
  }

  saveCodeVerifier (v: string): void { this.verifier = v }
  codeVerifier (): string { return this.verifier }
}

export interface SignIn {
  key?: string
  email?: string
  decision?: 'allow' | 'deny'
  /** Let the browser really load the redirect URI (a client listening there, e.g. mcp-remote's callback server). */
  deliver?: boolean
}

/**
 * Opens `url` in Chromium, signs in on the real login page (access key, optional email), answers
 * the consent page and returns the URL the browser was finally sent to (the client's redirect URI,
 * intercepted: nothing listens there).
 */
export async function signInWithBrowser (browser: Browser, url: URL | string, redirectPrefix: string, who: SignIn): Promise<URL> {
  const context = await browser.newContext()
  try {
    const page = await context.newPage()
    let landed: URL | undefined
    if (who.deliver === true) page.on('request', r => { if (r.url().startsWith(redirectPrefix)) landed = new URL(r.url()) })
    else {
      await page.route(`${redirectPrefix}**`, async route => {
        landed = new URL(route.request().url())
        await route.fulfill({ status: 200, contentType: 'text/plain', body: 'done' })
      })
    }
    await page.goto(String(url))
    await page.fill('input[name=key]', who.key ?? TEST_API_KEY)
    if (who.email !== undefined) await page.fill('input[name=email]', who.email)
    await page.click('button[type=submit]')
    await page.click(`button[value=${who.decision ?? 'allow'}]`) // waits for the consent page
    await page.waitForURL(u => u.href.startsWith(redirectPrefix))
    if (landed === undefined) throw new Error('the browser never reached the redirect URI')
    return landed
  } finally { await context.close() }
}

/** The authorization code of a redirect, or the OAuth error it carries. */
export function codeOf (landed: URL): string {
  const code = landed.searchParams.get('code')
  if (code === null) throw new Error(`no code: ${landed.searchParams.get('error') ?? '?'} ${landed.searchParams.get('error_description') ?? ''}`)
  return code
}

/** A browser stand-in for protocol tests: follows redirects itself and keeps cookies per path-less name. */
export class CookieBrowser {
  private readonly jar = new Map<string, string>()

  async fetch (url: string | URL, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers)
    if (this.jar.size > 0) headers.set('cookie', [...this.jar].map(([k, v]) => `${k}=${v}`).join('; '))
    const res = await fetch(url, { ...init, headers, redirect: 'manual' })
    for (const c of res.headers.getSetCookie()) {
      const [pair = ''] = c.split(';')
      const eq = pair.indexOf('=')
      this.jar.set(pair.slice(0, eq), pair.slice(eq + 1))
    }
    return res
  }

  /** GETs `url` and follows redirects on our server until a page (200/4xx) or a redirect elsewhere. */
  async follow (url: string | URL, stopAt: string): Promise<Response> {
    let res = await this.fetch(url)
    while (res.status >= 300 && res.status < 400) {
      const next = new URL(res.headers.get('location') ?? '', res.url === '' ? String(url) : res.url)
      if (next.href.startsWith(stopAt)) return res
      url = next
      res = await this.fetch(next)
    }
    return res
  }

  async post (url: string, form: Record<string, string>, headers: Record<string, string> = {}): Promise<Response> {
    return await this.fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, body: new URLSearchParams(form).toString() })
  }
}

export const csrfOf = (html: string): string => /name="csrf" value="([^"]+)"/.exec(html)?.[1] ?? ''

/** Signs in through the login page without a browser; returns where the flow finally redirects. */
export async function signInWithFetch (url: URL | string, redirectPrefix: string, who: SignIn, browser = new CookieBrowser()): Promise<URL> {
  let res = await browser.follow(url, redirectPrefix)
  let page = await res.text()
  const pageUrl = res.url
  res = await browser.post(`${pageUrl}/login`, { csrf: csrfOf(page), key: who.key ?? TEST_API_KEY, email: who.email ?? '' })
  if (res.status !== 303) throw new Error(`sign-in answered ${res.status}`)
  res = await browser.follow(new URL(res.headers.get('location') ?? '', pageUrl), redirectPrefix)
  if (res.status === 303) return new URL(res.headers.get('location') ?? '')
  page = await res.text()
  res = await browser.post(`${res.url}/consent`, { csrf: csrfOf(page), decision: who.decision ?? 'allow' })
  res = await browser.follow(new URL(res.headers.get('location') ?? '', pageUrl), redirectPrefix)
  return new URL(res.headers.get('location') ?? '')
}

/** RFC 7636 appendix B: a verifier and its S256 challenge. */
export const VERIFIER = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk'
export const CHALLENGE = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM'

/** Registers a public client (RFC 7591) and returns its id. */
export async function registerClient (base: string, redirect: string, name = 'protocol test'): Promise<string> {
  const res = await fetch(`${base}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: name, redirect_uris: [redirect], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'] })
  })
  if (res.status !== 201) throw new Error(`registration answered ${res.status}: ${await res.text()}`)
  return (await res.json() as { client_id: string }).client_id
}

export function authorizeUrl (base: string, clientId: string, redirect: string, extra: Record<string, string> = {}): string {
  const url = new URL(`${base}/oauth/authorize`)
  url.search = new URLSearchParams({
    client_id: clientId,
    redirect_uri: redirect,
    response_type: 'code',
    code_challenge: CHALLENGE,
    code_challenge_method: 'S256',
    scope: 'mcp',
    resource: `${base}/mcp`,
    state: 'st-1',
    ...extra
  }).toString()
  return url.href
}

export interface TokenReply { status: number, body: Record<string, unknown> }

export async function tokenRequest (base: string, form: Record<string, string>): Promise<TokenReply> {
  const res = await fetch(`${base}/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(form).toString() })
  return { status: res.status, body: await res.json() as Record<string, unknown> }
}

/** Code → tokens with the PKCE verifier; throws unless 200. */
export async function exchangeCode (base: string, clientId: string, redirect: string, landed: URL, verifier = VERIFIER): Promise<{ access_token: string, refresh_token: string }> {
  const reply = await tokenRequest(base, { grant_type: 'authorization_code', code: codeOf(landed), redirect_uri: redirect, client_id: clientId, code_verifier: verifier, resource: `${base}/mcp` })
  if (reply.status !== 200) throw new Error(`token endpoint answered ${reply.status}: ${JSON.stringify(reply.body)}`)
  return reply.body as { access_token: string, refresh_token: string }
}

/**
 * The authentication layer of /mcp alone: a POST with this bearer token. Authentication runs before
 * any MCP parsing (docs/contract.md#authentication-and-origin), so the status says whether the token was accepted (401 or not).
 */
export async function probeMcp (base: string, token: string, path = '/mcp'): Promise<Response> {
  return await fetch(`${base}${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' })
}
