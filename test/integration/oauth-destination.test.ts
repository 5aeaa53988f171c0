/*
 * The sign-in and consent pages name where this request's code goes (the host of its redirect_uri),
 * never a name the client chose; and registration refuses a client whose redirect URIs span more
 * than one host (loopback ones aside). Real HTTP, the real pages, no Docker.
 */
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import t from 'tap'
import { TEST_API_KEY } from '../helper.js'
import { chromiumOrSkip, gotoReady, launchChromium } from './chromium.js'
import { authorizeUrl, CookieBrowser, csrfOf, startOAuthServer } from '../fixtures/oauth-server.js'
import { tempDir } from '../fixtures/temp-dir.js'

const CLAUDE = 'https://claude.ai/api/mcp/auth_callback'
const EVIL = 'https://evil.example/cb'

/** The destination the page shows (the one `data-destination` element), and every element text naming the client. */
const shown = (html: string): string | undefined => /<code data-destination>([^<]*)<\/code>/.exec(html)?.[1]
const destinations = (html: string): number => html.split('data-destination').length - 1

interface Pages { login: string, consent: string, landed: URL }

/** GETs `url` and follows redirects only while they stay on this server (nothing is ever fetched elsewhere). */
async function followHere (browser: CookieBrowser, base: string, url: string | URL): Promise<Response> {
  let res = await browser.fetch(url)
  while (res.status >= 300 && res.status < 400) {
    const next = new URL(res.headers.get('location') ?? '', res.url === '' ? String(url) : res.url)
    if (next.origin !== new URL(base).origin) return res
    url = next
    res = await browser.fetch(next)
  }
  return res
}

/** Walks one authorization request through the real login and consent pages; returns both pages and where the code went. */
async function walk (base: string, clientId: string, redirect: string): Promise<Pages> {
  const browser = new CookieBrowser()
  let res = await followHere(browser, base, authorizeUrl(base, clientId, redirect))
  if (res.status !== 200) throw new Error(`the authorization request answered ${res.status}: ${await res.text()}`)
  const login = await res.text()
  const pageUrl = res.url
  res = await browser.post(`${pageUrl}/login`, { csrf: csrfOf(login), key: TEST_API_KEY, email: 'victim@example.com' })
  res = await followHere(browser, base, new URL(res.headers.get('location') ?? '', pageUrl))
  const consent = await res.text()
  res = await browser.post(`${res.url}/consent`, { csrf: csrfOf(consent), decision: 'allow' })
  res = await followHere(browser, base, new URL(res.headers.get('location') ?? '', pageUrl))
  return { login, consent, landed: new URL(res.headers.get('location') ?? '') }
}

async function register (base: string, body: Record<string, unknown>): Promise<{ status: number, body: Record<string, unknown> }> {
  const res = await fetch(`${base}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token_endpoint_auth_method: 'none', ...body }) })
  return { status: res.status, body: await res.json() as Record<string, unknown> }
}

t.test('a client named Claude with claude.ai and evil.example (kept from before the one-host rule): both pages name evil.example', async t => {
  const dataDir = await tempDir(t, 'oauth-dest')
  // The state file format every earlier version wrote, holding the client of the attack.
  const id = 'claude-lookalike-client-1'
  const client = { client_id: id, client_id_issued_at: 1700000000, client_name: 'Claude', redirect_uris: [CLAUDE, EVIL], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' }
  await mkdir(join(dataDir, 'oauth', 'state'), { recursive: true, mode: 0o700 })
  await writeFile(join(dataDir, 'oauth', 'state', 'Client.json'), JSON.stringify({ version: 1, entries: [[id, { p: client, e: null }]] }), { mode: 0o600 })
  const { base } = await startOAuthServer(t, { dataDir })

  const pages = await walk(base, id, EVIL)
  t.equal(pages.landed.origin, 'https://evil.example', 'the code really goes to evil.example')
  for (const [name, html] of [['login', pages.login], ['consent', pages.consent]] as const) {
    t.equal(shown(html), 'evil.example', `${name}: the destination shown is this request's host`)
    t.equal(destinations(html), 1, `${name}: exactly one destination`)
    t.notMatch(html, /claude\.ai/, `${name}: the client's other redirect URI is not shown`)
    t.match(html, /calls itself <q>Claude<\/q>, a name anyone can choose/, `${name}: the name is shown as the app's own claim`)
    t.notMatch(html.replace(/<q>Claude<\/q>/g, ''), /Claude/, `${name}: the name appears nowhere else`)
  }
})

t.test('loopback clients may list several ports; the page shows the one of this request', async t => {
  const { base } = await startOAuthServer(t)
  const first = 'http://127.0.0.1:45001/cb'
  const second = 'http://localhost:45002/callback'
  const reg = await register(base, { client_name: 'Claude', redirect_uris: [first, second, 'http://[::1]:45003/cb'] })
  t.equal(reg.status, 201, 'all loopback: accepted')
  const pages = await walk(base, String(reg.body.client_id), second)
  t.equal(pages.landed.host, 'localhost:45002')
  t.equal(shown(pages.login), 'localhost:45002')
  t.equal(shown(pages.consent), 'localhost:45002')
  t.match(pages.consent, /a program on your own device at/)
  t.notMatch(pages.login + pages.consent, /45001/)
})

t.test('a look-alike host is shown in ASCII (punycode) and a hostile name is escaped', async t => {
  const { base } = await startOAuthServer(t)
  const lookalike = 'https://cl\u0430ude.ai/api/mcp/auth_callback' // Cyrillic а
  const reg = await register(base, { client_name: '<img src=x onerror=alert(1)>Claude', redirect_uris: [lookalike] })
  t.equal(reg.status, 201)
  const pages = await walk(base, String(reg.body.client_id), lookalike)
  for (const html of [pages.login, pages.consent]) {
    t.match(shown(html), /^xn--[a-z0-9-]+\.ai$/, 'punycode, not a convincing claude.ai')
    t.notMatch(html, /\u0430/)
    t.notMatch(html, /<img/)
    t.match(html, /&lt;img src=x onerror=alert\(1\)&gt;Claude/)
  }
})

t.test('registration refuses redirect URIs on more than one host (RFC 7591 invalid_redirect_uri)', async t => {
  const { base } = await startOAuthServer(t, { oauth: { registrationsPerMinute: 100 } })
  const refused: string[][] = [
    [CLAUDE, EVIL],
    ['http://127.0.0.1:8080/cb', 'https://evil.example/cb'],
    ['cursor://anysphere.cursor-mcp/oauth/callback', 'https://www.cursor.com/agents/callback']
  ]
  for (const uris of refused) {
    const reg = await register(base, { client_name: 'Claude', redirect_uris: uris })
    t.equal(reg.status, 400, uris.join(' + '))
    t.equal(reg.body.error, 'invalid_redirect_uri')
    t.match(reg.body.error_description, /more than one host/)
    t.notOk('client_id' in reg.body)
  }
  const both = await register(base, { redirect_uris: [CLAUDE, EVIL] })
  t.match(both.body.error_description, /claude\.ai, evil\.example/, 'the description names the hosts')
  for (const uris of [[CLAUDE], ['https://app.example/a', 'https://app.example:8443/b'], ['http://127.0.0.1:1/cb', 'http://localhost:2/cb', 'http://[::1]:3/cb']]) {
    t.equal((await register(base, { redirect_uris: uris })).status, 201, uris.join(' + '))
  }
})

t.test('in Chromium the destination is the largest text of the sign-in page, above the form', chromiumOrSkip(), async t => {
  const { base } = await startOAuthServer(t)
  const reg = await register(base, { client_name: 'Claude', redirect_uris: [EVIL] })
  const browser = await launchChromium(t)
  const page = await browser.newPage()
  // Only this server's pages load: the sign-in is never completed, so nothing goes to evil.example.
  await page.route(url => new URL(url).origin !== base, async route => { await route.abort() })
  const destination = page.locator('[data-destination]')
  await gotoReady(page, authorizeUrl(base, String(reg.body.client_id), EVIL), async () => { await destination.waitFor() })
  t.equal(await destination.innerText({ timeout: 5000 }), 'evil.example')
  const size = async (selector: string): Promise<number> => Number(await page.evaluate(`parseFloat(getComputedStyle(document.querySelector(${JSON.stringify(selector)})).fontSize)`))
  t.ok(await size('[data-destination]') >= 1.3 * await size('p.hint'), 'larger than the text around it')
  const box = await destination.boundingBox()
  const keyBox = await page.locator('input[name=key]').boundingBox()
  t.ok(box !== null && keyBox !== null && box.y < keyBox.y, 'above the access key field')
  t.notMatch(await page.locator('body').innerText(), /claude\.ai/)
})
