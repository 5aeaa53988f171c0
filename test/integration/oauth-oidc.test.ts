/*
 * Teams sign in as themselves (docs/contract.md#oauth): the OAuth login page hands off to an upstream OpenID
 * Connect issuer (here a local oidc-provider with its development login form, on loopback), and only
 * allowed, verified emails come back signed in. Driven in real Chromium.
 */
import { createServer } from 'node:http'
import t, { type Test } from 'tap'
import Provider from 'oidc-provider'
import type { Page } from 'playwright-core'
import { userChatId } from '../../core/identity.js'
import { chromiumOrSkip, closeContext, gotoReady, launchChromium } from './chromium.js'
import { authorizeUrl, exchangeCode, freePort, probeMcp, registerClient, startOAuthServer } from '../fixtures/oauth-server.js'
import { TEST_API_KEY } from '../helper.js'

const chromium = chromiumOrSkip()
const REDIRECT = 'http://127.0.0.1:45873/cb'
const SECRET = 'upstream-client-secret-0123456789abcdef'
const UNVERIFIED = 'una@example.com'

/** A stand-in for Google/Keycloak: any login name is accepted, and it becomes the account's email. */
async function startIssuer (t: Test, callback: string): Promise<string> {
  const port = await freePort()
  const issuer = `http://127.0.0.1:${port}`
  const idp = new Provider(issuer, {
    clients: [{ client_id: 'cubicle', client_secret: SECRET, redirect_uris: [callback], token_endpoint_auth_method: 'client_secret_post' }],
    async findAccount (_ctx, sub) {
      return { accountId: sub, claims: async () => ({ sub, email: sub, email_verified: sub !== UNVERIFIED, name: `Person ${sub.split('@')[0] ?? ''}` }) }
    },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
    cookies: { keys: ['test-cookie-key-0123456789'] },
    features: { devInteractions: { enabled: true } }
  })
  const server = createServer(idp.callback())
  await new Promise<void>(resolve => server.listen(port, '127.0.0.1', resolve))
  t.teardown(async () => { server.closeAllConnections(); await new Promise(resolve => server.close(resolve)) })
  return issuer
}

/** Cubicle's login page → "organisation account" → the issuer's login and consent → back; returns the page. */
async function viaIssuer (page: Page, url: string, login: string): Promise<void> {
  const upstream = page.locator('text=Sign in with your organisation account')
  await gotoReady(page, url, async () => { await upstream.waitFor() })
  await upstream.click()
  await page.fill('input[name=login]', login)
  await page.fill('input[name=password]', 'anything')
  await page.click('button[type=submit]')
  await page.click('button:has-text("Continue")') // the issuer's consent
}

t.test('sign-in through an upstream OpenID Connect issuer, with the email allowlist', { skip: chromium.skip }, async t => {
  const port = await freePort()
  const issuer = await startIssuer(t, `http://127.0.0.1:${port}/oauth/upstream/callback`)
  const server = await startOAuthServer(t, {
    port,
    env: { OIDC_ISSUER: issuer, OIDC_CLIENT_ID: 'cubicle', OIDC_CLIENT_SECRET: SECRET, OIDC_ALLOWED_EMAILS: 'example.com, boss@partner.example' }
  })
  const clientId = await registerClient(server.base, REDIRECT, 'Claude')
  const browser = await launchChromium(t)

  t.test('an allowed email signs in, consents, and its token opens /mcp as that user', async t => {
    const context = await browser.newContext()
    t.teardown(async () => { await closeContext(context) })
    const page = await context.newPage()
    let landed: URL | undefined
    await page.route(`${REDIRECT}**`, async route => {
      landed = new URL(route.request().url())
      await route.fulfill({ status: 200, contentType: 'text/plain', body: 'done' })
    })
    await viaIssuer(page, authorizeUrl(server.base, clientId, REDIRECT), 'Ann@Example.com')
    t.match(await page.textContent('body'), /signed in as\s+ann@example\.com/i, 'our consent page names the verified email')
    await page.click('button[value=allow]')
    await page.waitForURL(u => u.href.startsWith(REDIRECT))
    const tokens = await exchangeCode(server.base, clientId, REDIRECT, landed as URL)
    t.not((await probeMcp(server.base, tokens.access_token)).status, 401)
    const { users } = await (await fetch(`${server.base}/oauth/users`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } })).json() as { users: Array<Record<string, unknown>> }
    t.match(users.find(u => u.subject === 'ann@example.com'), { via: 'oidc', email: 'ann@example.com', name: 'Person Ann', chatId: userChatId('ann@example.com'), clients: ['Claude'] })
  })

  t.test('an email off the list, or unverified, is refused with a page that says why', async t => {
    for (const [login, why] of [['eve@evil.example', /eve@evil\.example is not allowed on this server/], [UNVERIFIED, /is not verified/]] as const) {
      const context = await browser.newContext()
      t.teardown(async () => { await closeContext(context) })
      const page = await context.newPage()
      let status = 0
      page.on('response', r => { if (r.url().includes('/oauth/upstream/callback')) status = r.status() })
      await viaIssuer(page, authorizeUrl(server.base, clientId, REDIRECT), login)
      await page.waitForSelector('[role=alert]')
      t.equal(status, 403, login)
      t.match(await page.textContent('body'), why)
    }
    const { users } = await (await fetch(`${server.base}/oauth/users`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } })).json() as { users: Array<{ subject: string }> }
    t.same(users.map(u => u.subject), ['ann@example.com'], 'nobody else got an account')
  })

  t.test('a callback with a forged state is refused', async t => {
    const res = await fetch(`${server.base}/oauth/upstream/callback?code=x&state=forged`)
    t.equal(res.status, 502)
    t.match(await res.text(), /unknown or expired sign-in attempt/)
  })
})
