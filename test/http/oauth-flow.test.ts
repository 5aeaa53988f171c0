/*
 * The authorization server's protocol rules over real HTTP (docs/contract.md#oauth), without Docker or a
 * browser: metadata, PKCE and resource binding, refresh rotation and reuse, deleted clients,
 * restarts, CSRF, rate limits, and that the static key keeps working beside OAuth.
 */
import { stat, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import t from 'tap'
import { connect } from '../fixtures/mcp-probe.js'
import { TEST_API_KEY } from '../helper.js'
import {
  authorizeUrl, CookieBrowser, csrfOf, exchangeCode, probeMcp, registerClient, signInWithFetch, startOAuthServer, tokenRequest
} from '../fixtures/oauth-server.js'

const REDIRECT = 'http://127.0.0.1:45872/cb'
const admin = { authorization: `Bearer ${TEST_API_KEY}` }

t.test('OAuth protocol rules', async t => {
  const server = await startOAuthServer(t, { oauth: { registrationsPerMinute: 5 } })
  const { base } = server
  const clientId = await registerClient(base, REDIRECT)
  const signIn = async (email: string, extra: Record<string, string> = {}): Promise<{ access_token: string, refresh_token: string }> =>
    await exchangeCode(base, clientId, REDIRECT, await signInWithFetch(authorizeUrl(base, clientId, REDIRECT, extra), REDIRECT, { email }))

  t.test('without credentials /mcp answers 401 with the RFC 9728 pointer; the bearer key still works', async t => {
    const res = await fetch(`${base}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
    t.equal(res.status, 401)
    t.equal(res.headers.get('www-authenticate'), `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`)
    t.same(await res.json(), { error: 'Unauthorized' })
    const client = await connect(t, base, { Authorization: `Bearer ${TEST_API_KEY}`, 'X-Chat-Id': 'key-chat' })
    t.same((await client.listTools()).tools, [])
  })

  t.test('protected resource and authorization server metadata', async t => {
    const prm = await (await fetch(`${base}/.well-known/oauth-protected-resource/mcp`)).json() as Record<string, unknown>
    t.same(prm, await (await fetch(`${base}/.well-known/oauth-protected-resource`)).json())
    t.match(prm, { resource: `${base}/mcp`, authorization_servers: [base], scopes_supported: ['mcp'], bearer_methods_supported: ['header'] })
    const as = await (await fetch(`${base}/.well-known/oauth-authorization-server`)).json() as Record<string, unknown>
    t.same(as, await (await fetch(`${base}/.well-known/openid-configuration`)).json())
    t.match(as, {
      issuer: base,
      authorization_endpoint: `${base}/oauth/authorize`,
      token_endpoint: `${base}/oauth/token`,
      registration_endpoint: `${base}/oauth/register`,
      revocation_endpoint: `${base}/oauth/revoke`,
      code_challenge_methods_supported: ['S256'],
      response_types_supported: ['code'],
      grant_types_supported: ['authorization_code', 'refresh_token']
    })
    t.notOk('dpop_signing_alg_values_supported' in as, 'no DPoP: /mcp takes bearer tokens')
    const spoofed = await (await fetch(`${base}/.well-known/oauth-authorization-server`, { headers: { 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https' } })).json() as Record<string, unknown>
    t.equal(spoofed.token_endpoint, `${base}/oauth/token`, 'URLs come from PUBLIC_BASE_URL, never from request headers')
  })

  t.test('PKCE is required and the resource must be this server', async t => {
    const browser = new CookieBrowser()
    const noPkce = new URL(authorizeUrl(base, clientId, REDIRECT))
    noPkce.searchParams.delete('code_challenge')
    noPkce.searchParams.delete('code_challenge_method')
    let res = await browser.follow(noPkce, REDIRECT)
    t.equal(new URL(res.headers.get('location') ?? '').searchParams.get('error'), 'invalid_request')
    const plain = new URL(authorizeUrl(base, clientId, REDIRECT, { code_challenge_method: 'plain' }))
    res = await browser.follow(plain, REDIRECT)
    t.equal(new URL(res.headers.get('location') ?? '').searchParams.get('error'), 'invalid_request')
    res = await browser.follow(authorizeUrl(base, clientId, REDIRECT, { resource: 'https://other.example/mcp' }), REDIRECT)
    t.equal(new URL(res.headers.get('location') ?? '').searchParams.get('error'), 'invalid_target', 'no token for another audience (RFC 8707)')
  })

  t.test('an authorization request without scope gets the default scope, mcp (RFC 6749 section 3.3)', async t => {
    for (const scope of [undefined, '']) {
      const url = new URL(authorizeUrl(base, clientId, REDIRECT))
      if (scope === undefined) url.searchParams.delete('scope')
      else url.searchParams.set('scope', scope)
      const tokens = await exchangeCode(base, clientId, REDIRECT, await signInWithFetch(url, REDIRECT, { email: 'noscope@example.com' })) as { access_token: string, scope?: string }
      t.equal(tokens.scope, 'mcp', `scope ${scope === undefined ? 'absent' : 'empty'}`)
      t.not((await probeMcp(base, tokens.access_token)).status, 401)
    }
  })

  t.test('the code needs the PKCE verifier and works once', async t => {
    const landed = await signInWithFetch(authorizeUrl(base, clientId, REDIRECT), REDIRECT, { email: 'dan@example.com' })
    await t.rejects(exchangeCode(base, clientId, REDIRECT, landed, 'x'.repeat(43)), /invalid_grant/)
    const landed2 = await signInWithFetch(authorizeUrl(base, clientId, REDIRECT), REDIRECT, { email: 'dan@example.com' })
    const tokens = await exchangeCode(base, clientId, REDIRECT, landed2)
    t.not((await probeMcp(base, tokens.access_token)).status, 401)
    await t.rejects(exchangeCode(base, clientId, REDIRECT, landed2), /invalid_grant/, 'a code is single-use')
  })

  t.test('refresh rotates; reusing a rotated refresh token revokes the whole grant', async t => {
    const first = await signIn('erin@example.com')
    const refreshed = await tokenRequest(base, { grant_type: 'refresh_token', refresh_token: first.refresh_token, client_id: clientId })
    t.equal(refreshed.status, 200)
    t.not(refreshed.body.refresh_token, first.refresh_token)
    const access = String(refreshed.body.access_token)
    t.not((await probeMcp(base, access)).status, 401)
    const reuse = await tokenRequest(base, { grant_type: 'refresh_token', refresh_token: first.refresh_token, client_id: clientId })
    t.match(reuse, { status: 400, body: { error: 'invalid_grant' } })
    t.equal((await probeMcp(base, access)).status, 401, 'the stolen-token case: everything of the grant is dead')
  })

  t.test('OAuth tokens open /mcp only, not /mcp-info, chat routes or the operator routes', async t => {
    const { access_token: token } = await signIn('fay@example.com')
    for (const path of ['/mcp-info', '/oauth/users']) {
      const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${token}` } })
      t.equal(res.status, 401, path)
      t.equal(res.headers.get('www-authenticate'), 'Bearer', `${path}: the key's plain challenge`)
    }
  })

  t.test('operator routes: list users, revoke one; their client is deleted and refresh says invalid_client', async t => {
    const own = await registerClient(base, REDIRECT, 'Gus phone')
    const tokens = await exchangeCode(base, own, REDIRECT, await signInWithFetch(authorizeUrl(base, own, REDIRECT), REDIRECT, { email: 'gus@example.com' }))
    const list = await (await fetch(`${base}/oauth/users`, { headers: admin })).json() as { users: Array<Record<string, unknown>> }
    t.match(list.users.find(u => u.subject === 'gus@example.com'), { email: 'gus@example.com', via: 'key', clients: ['Gus phone'], chatId: /^user:[0-9a-f]{20}$/ })
    const res = await fetch(`${base}/oauth/users/${encodeURIComponent('gus@example.com')}`, { method: 'DELETE', headers: admin })
    t.same(await res.json(), { revoked: 'gus@example.com', grants: 1, clients: 1 })
    t.equal((await probeMcp(base, tokens.access_token)).status, 401)
    const refresh = await tokenRequest(base, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: own })
    t.match(refresh, { status: 401, body: { error: 'invalid_client' } }, 'Claude registers again on invalid_client')
    const again = await fetch(`${base}/oauth/users/${encodeURIComponent('gus@example.com')}`, { method: 'DELETE', headers: admin })
    t.equal(again.status, 404)
    t.equal((await fetch(`${base}/oauth/users/nobody`, { method: 'DELETE' })).status, 401)
  })

  t.test('login and consent forms refuse requests a cross-site page could make', async t => {
    const browser = new CookieBrowser()
    const page = await browser.follow(authorizeUrl(base, clientId, REDIRECT), REDIRECT)
    const html = await page.text()
    t.equal(page.headers.get('x-frame-options'), 'DENY')
    t.match(page.headers.get('content-security-policy'), /frame-ancestors 'none'/)
    t.notMatch(html, /<script/i)
    const action = `${page.url}/login`
    const form = { csrf: csrfOf(html), key: TEST_API_KEY }
    t.equal((await browser.post(action, { ...form, csrf: 'forged' })).status, 403, 'wrong CSRF token')
    t.equal((await browser.post(action, form, { 'sec-fetch-site': 'cross-site' })).status, 403, 'cross-site per the browser')
    t.equal((await browser.post(action, form, { origin: 'https://evil.example' })).status, 403, 'foreign Origin')
    t.equal((await new CookieBrowser().post(action, form)).status, 400, 'without the interaction cookie')
    t.equal((await browser.post(action, { ...form, email: 'not an email' })).status, 400)
    t.equal((await browser.post(action, form)).status, 303, 'the genuine form passes')
  })

  t.test('deny at the consent page sends access_denied back to the app', async t => {
    const landed = await signInWithFetch(authorizeUrl(base, clientId, REDIRECT), REDIRECT, { email: 'hal@example.com', decision: 'deny' })
    t.equal(landed.searchParams.get('error'), 'access_denied')
  })
})

t.test('client registration needs no credential, so it is rate limited per address', async t => {
  const { base } = await startOAuthServer(t, { oauth: { registrationsPerMinute: 2 } })
  const statuses: number[] = []
  // Fixed one-minute windows: should one end mid-test, the count starts over, hence the slack.
  for (let i = 0; i < 6 && !statuses.includes(429); i++) {
    const res = await fetch(`${base}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }) })
    statuses.push(res.status)
    if (res.status === 429) {
      t.match(res.headers.get('retry-after'), /^\d+$/)
      t.match(await res.json(), { error: 'too_many_requests' })
    }
  }
  t.same(statuses.slice(0, 2), [201, 201])
  t.equal(statuses.at(-1), 429)
})

t.test('a restart keeps users connected: state and keys persist in DATA_DIR', async t => {
  const first = await startOAuthServer(t)
  const clientId = await registerClient(first.base, REDIRECT)
  const tokens = await exchangeCode(first.base, clientId, REDIRECT, await signInWithFetch(authorizeUrl(first.base, clientId, REDIRECT), REDIRECT, { email: 'ida@example.com' }))
  const jwks = await (await fetch(`${first.base}/oauth/jwks`)).json() as { keys: Array<{ kid: string }> }
  await first.app.close()
  t.equal((await stat(join(first.dataDir, 'oauth', 'keys.json'))).mode & 0o777, 0o600)
  t.notMatch(await readFile(join(first.dataDir, 'oauth', 'state', 'AccessToken.json'), 'utf8'), /"d":/, 'no private key material in the state files')
  const second = await startOAuthServer(t, { dataDir: first.dataDir, port: first.port })
  t.not((await probeMcp(second.base, tokens.access_token)).status, 401, 'the access token survived the restart')
  const refreshed = await tokenRequest(second.base, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: clientId })
  t.equal(refreshed.status, 200, 'so did the refresh token and the client')
  t.same((await (await fetch(`${second.base}/oauth/jwks`)).json() as typeof jwks).keys.map(k => k.kid), jwks.keys.map(k => k.kid), 'the same signing keys')
})

// the /mcp failure throttle (30 failures a minute per address) counts wrong OAuth tokens
// like wrong keys, and, like the key, a valid OAuth token is never refused by it.
t.test('wrong tokens on /mcp are throttled per address; a valid OAuth token and the key still pass', async t => {
  const { base } = await startOAuthServer(t)
  const clientId = await registerClient(base, REDIRECT)
  const tokens = await exchangeCode(base, clientId, REDIRECT, await signInWithFetch(authorizeUrl(base, clientId, REDIRECT), REDIRECT, { email: 'jo@example.com' }))
  const statuses: number[] = []
  // Fixed one-minute windows: should one end mid-test, the count starts over, hence up to 70 tries.
  for (let i = 0; i < 70 && !statuses.includes(429); i++) statuses.push((await probeMcp(base, `forged${i}`.padEnd(43, 'A'))).status)
  t.ok(statuses.length > 30, 'at least 30 failures are answered normally')
  t.same(new Set(statuses.slice(0, -1)), new Set([401]))
  t.equal(statuses.at(-1), 429)
  const valid = await probeMcp(base, tokens.access_token)
  t.equal(valid.status, 200, 'a valid OAuth token from the throttled address')
  t.equal((await probeMcp(base, TEST_API_KEY)).status, 200, 'the key from the throttled address')
  const again = await probeMcp(base, 'B'.repeat(43))
  t.equal(again.status, 429)
  t.match(again.headers.get('retry-after'), /^\d+$/)
})
