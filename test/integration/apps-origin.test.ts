// Apps on their own origins (APPS_DOMAIN, docs/features.md#app-preview-urls) on real Docker and real
// Chromium: wildcard DNS stands in as Chromium's --host-resolver-rules (every *.apps.test is 127.0.0.1),
// Host-header routing on the loopback. The app works at the root of <chat key>-<port>.apps.test (asset,
// redirect, WebSocket), shares no cookie or storage with the server's origin or another app, the path
// form redirects there, and an unknown or forged app host is refused.
import t from 'tap'
import { request } from 'node:http'
import WebSocket from 'ws'
import { dockerOrSkip } from './docker.js'
import { chromiumOrSkip, launchChromium } from './chromium.js'
import { browserApp } from './browser-app.js'
import { startApp } from '../fixtures/web-app.js'
import { connect, textOf } from '../fixtures/mcp-probe.js'
import { TEST_API_KEY } from '../helper.js'
import { chatKey } from '../../core/chat-id.js'

const gate = await dockerOrSkip()
const browserGate = gate.skip !== false ? gate : chromiumOrSkip()

interface Answer { status: number, headers: Record<string, string | string[] | undefined>, body: string }

/** One request to the server on the loopback with the given Host (what wildcard DNS would send there). */
async function viaHost (port: number, host: string, path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<Answer> {
  return await new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method, headers: { ...headers, Host: host } }, res => {
      let body = ''
      res.on('data', (c: Buffer) => { body += c.toString() })
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, headers: res.headers, body }) })
    })
    req.on('error', reject)
    req.end(method === 'POST' ? 'x' : undefined)
  })
}

t.test('each app on its own origin: works at the root, isolated from the server and from other apps', browserGate, async t => {
  const { app, url } = await browserApp(t, { APPS_DOMAIN: 'apps.test', APPS_TIMEOUT: '5', COMMAND_TIMEOUT: '120' }, ['ports'])
  const port = Number(new URL(url).port)
  const a = await connect(t, url, { Authorization: `Bearer ${TEST_API_KEY}`, 'X-Chat-Id': 'origin-a' })
  const b = await connect(t, url, { Authorization: `Bearer ${TEST_API_KEY}`, 'X-Chat-Id': 'origin-b' })
  const bash = async (c: typeof a, command: string): Promise<string> => textOf(await c.callTool({ name: 'bash_tool', arguments: { command, description: 'app test' } }, undefined, { timeout: 180_000 }))
  const tokenA = app.links.token('origin-a', 'c') as string
  const tokenB = app.links.token('origin-b', 'c') as string
  const hostA = `${chatKey('origin-a')}-3000.apps.test:${port}`
  const hostB = `${chatKey('origin-b')}-3000.apps.test:${port}`
  const originA = `http://${hostA}`
  const originB = `http://${hostB}`

  const started = await bash(a, startApp(3000))
  t.match(started, `3000: ${originA}/]`, 'bash_tool hands out the app\'s own origin')
  await bash(b, startApp(3000))
  t.same(await (await fetch(`${url}/api/apps/origin-a?t=${tokenA}`)).json(), { apps: [{ port: 3000, url: `${originA}/?t=${tokenA}` }] })

  // Refusals on the app host, as on the path form.
  t.equal((await viaHost(port, hostA, '/small')).status, 401, 'no credential')
  t.equal((await viaHost(port, hostA, '/small', { Cookie: `cubicle_app=${tokenB}` })).status, 403, 'another chat\'s cookie')
  t.equal((await viaHost(port, hostA, `/small?t=${tokenB}`)).status, 403, 'another chat\'s token')
  const post = await viaHost(port, hostA, '/upload', { Cookie: `cubicle_app=${tokenA}`, Origin: originB, 'Content-Type': 'text/plain' }, 'POST')
  t.equal(post.status, 403, 'a write from another app\'s origin is refused')
  const own = await viaHost(port, hostA, '/upload', { Cookie: `cubicle_app=${tokenA}`, Origin: originA, 'Content-Type': 'text/plain' }, 'POST')
  t.equal(own.status, 200, 'a write from the app\'s own origin passes')
  const seen = JSON.parse((await viaHost(port, hostA, '/headers', { Authorization: `Bearer ${TEST_API_KEY}`, Cookie: 'cubicle_app_chat=origin-a; mine=1' })).body) as { url: string, headers: Record<string, string> }
  t.equal(seen.url, '/headers', 'the app sees its own path, no prefix')
  t.equal(seen.headers.host, hostA, 'the app sees its own host')
  t.equal(seen.headers['x-forwarded-prefix'], undefined, 'no prefix header')
  t.equal(seen.headers.cookie, 'mine=1', 'none of our cookies reaches the app')
  const forged = await viaHost(port, hostA, '/cookie', { Authorization: `Bearer ${TEST_API_KEY}` })
  t.same(forged.headers['set-cookie'], ['root=1; Path=/'], 'Domain dropped, our cookie name refused')
  const go = await viaHost(port, hostA, '/go', { Authorization: `Bearer ${TEST_API_KEY}` })
  t.equal(go.headers.location, `${originA}/landed?from=go`, 'a redirect stays on the app\'s origin')

  // Unknown hosts: a key no chat of this server has, a malformed label, a port out of range.
  for (const host of [`${'0'.repeat(32)}-3000.apps.test:${port}`, `x-3000.apps.test:${port}`, `${chatKey('origin-a')}-80.apps.test:${port}`]) {
    const r = await viaHost(port, host, '/', { Authorization: `Bearer ${TEST_API_KEY}`, Accept: 'application/json' })
    t.equal(r.status, 404, host)
    t.match(r.body, /app_origin_unknown/)
  }
  // A forged chat cookie cannot name another chat for a key: the key must be the cookie's chat's.
  const wrong = await viaHost(port, `${'1'.repeat(32)}-3000.apps.test:${port}`, '/small', { Authorization: `Bearer ${TEST_API_KEY}`, Cookie: 'cubicle_app_chat=origin-a' })
  t.equal(wrong.status, 404, 'a chat cookie for another key is ignored')
  // The server's own routes are not on an app host: everything there is the app's.
  t.equal((await viaHost(port, hostA, '/api/apps/origin-a', { Authorization: `Bearer ${TEST_API_KEY}` })).body, 'not found', 'the app answers /api/apps/…, not the server')

  // The path form on the server's origin redirects to the app's origin (the token goes along, once).
  const moved = await fetch(`${url}/apps/origin-a/3000/landed?x=1&t=${tokenA}`, { redirect: 'manual' })
  t.equal(moved.status, 303)
  t.equal(moved.headers.get('location'), `${originA}/landed?x=1&t=${tokenA}`)
  t.equal((await fetch(`${url}/apps/origin-a/3000/`, { redirect: 'manual' })).status, 401, 'no credential: no redirect either')
  const pathSocket = await new Promise<number>(resolve => {
    const ws = new WebSocket(`${url.replace('http:', 'ws:')}/apps/origin-a/3000/ws?t=${tokenA}`)
    ws.once('unexpected-response', (_req, res) => { resolve(res.statusCode ?? 0) })
    ws.once('open', () => { ws.close(); resolve(101) })
    ws.once('error', () => {})
  })
  t.equal(pathSocket, 400, 'a WebSocket on the path form is refused (it cannot follow a redirect): use_app_origin')
  // Through the app's origin the same WebSocket works (Host routing before the upgrade too).
  const echoed = await new Promise<string>((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`, { headers: { Host: hostA, Cookie: `cubicle_app=${tokenA}` }, origin: originA })
    ws.once('open', () => { ws.send('hi') })
    ws.once('message', data => { resolve(String(data)); ws.close() })
    ws.once('error', reject)
  })
  t.equal(echoed, 'echo:hi', 'a WebSocket on the app host, with the app\'s own Origin')

  // The browser, with every *.apps.test resolved to the loopback.
  const browser = await launchChromium(t, ['--host-resolver-rules=MAP *.apps.test 127.0.0.1'])
  const context = await browser.newContext()
  const page = await context.newPage()
  await page.goto(`${url}/apps/origin-a/3000/?t=${tokenA}`)
  t.equal(page.url(), `${originA}/`, 'the path form lands on the app\'s origin, token out of the address')
  await page.waitForFunction('document.title === \'ws:pong\'', undefined, { timeout: 20_000 })
  t.equal(await page.evaluate('getComputedStyle(document.getElementById(\'h\')).color'), 'rgb(1, 2, 3)', 'the stylesheet at the root loaded')
  await page.waitForFunction('window.appHeaders !== undefined')
  await page.evaluate('localStorage.setItem(\'secret\', \'of-app-a\')')
  const cookies = await context.cookies()
  const ours = cookies.filter(c => c.name.startsWith('cubicle_app')).map(c => ({ name: c.name, domain: c.domain, path: c.path, httpOnly: c.httpOnly }))
  t.same(ours.sort((x, y) => x.name.localeCompare(y.name)), [
    { name: 'cubicle_app', domain: hostA.split(':')[0], path: '/', httpOnly: true },
    { name: 'cubicle_app_chat', domain: hostA.split(':')[0], path: '/', httpOnly: true }
  ], 'our cookies are the app host\'s alone')
  t.equal(cookies.find(c => c.name === 'appsid')?.domain, hostA.split(':')[0], 'the app\'s cookie is its own host\'s')
  t.equal(await page.evaluate('document.cookie.includes(\'cubicle_app\')'), false, 'script cannot read our cookies')

  // App B in the same browser: another origin, nothing of app A visible.
  const pageB = await context.newPage()
  await pageB.goto(`${originB}/?t=${tokenB}`)
  await pageB.waitForFunction('document.title === \'ws:pong\'', undefined, { timeout: 20_000 })
  t.equal(await pageB.evaluate('localStorage.getItem(\'secret\')'), null, 'app B does not see app A\'s storage')
  t.equal(await pageB.evaluate('document.cookie.includes(\'appsid\')'), true, 'app B has its own app cookie')
  t.equal(await pageB.evaluate(`fetch(${JSON.stringify(`${originA}/headers`)}, { credentials: 'include' }).then(r => 'read', () => 'blocked')`), 'blocked', 'app B cannot read app A (no CORS)')
  // The server's origin: not app A's storage either.
  const server = await context.newPage()
  await server.goto(`${url}/health`)
  t.equal(await server.evaluate('localStorage.getItem(\'secret\')'), null, 'the server\'s origin does not share app A\'s storage')
  t.equal(await server.evaluate('document.cookie'), '', 'nor its cookies')
})
