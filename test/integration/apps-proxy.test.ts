// App preview URLs on real Docker and real Chromium (docs/features.md#app-preview-urls): an app the model
// starts in the sandbox opened through /apps/<chat>/<port>/ with its asset, redirect, cookies and
// WebSocket; token and cross-chat refusals; hostile answers; SSE streamed; a stopped sandbox never started.
import t from 'tap'
import WebSocket from 'ws'
import { dockerOrSkip } from './docker.js'
import { chromiumOrSkip, gotoReady, launchChromium } from './chromium.js'
import { browserApp } from './browser-app.js'
import { startApp } from '../fixtures/web-app.js'
import { connect, textOf } from '../fixtures/mcp-probe.js'
import { TEST_API_KEY } from '../helper.js'

const gate = await dockerOrSkip()
const browserGate = gate.skip !== false ? gate : chromiumOrSkip()

t.test('an app in the sandbox works through its preview URL, and only for its own chat', browserGate, async t => {
  const { app, url } = await browserApp(t, { APPS_TIMEOUT: '3', COMMAND_TIMEOUT: '120' }, ['ports'])
  const a = await connect(t, url, { Authorization: `Bearer ${TEST_API_KEY}`, 'X-Chat-Id': 'ports-a' })
  const b = await connect(t, url, { Authorization: `Bearer ${TEST_API_KEY}`, 'X-Chat-Id': 'ports-b' })
  const bash = async (c: typeof a, command: string): Promise<string> => textOf(await c.callTool({ name: 'bash_tool', arguments: { command, description: 'app test' } }, undefined, { timeout: 180_000 }))
  const tokenA = app.links.token('ports-a', 'c') as string
  const tokenB = app.links.token('ports-b', 'c') as string
  const filesA = app.links.token('ports-a', 'f') as string
  const base = `${url}/apps/ports-a/3000`

  t.equal((await fetch(`${base}/small`, { headers: { Cookie: `cubicle_app=${tokenA}` } })).status, 409, 'no sandbox yet: refused, and nothing is started')
  t.equal((await app.sandbox.status('ports-a')).state, 'absent')

  const started = await bash(a, startApp(3000))
  t.match(started, /started/)
  t.match(started, `[New listening ports, open in the user's browser: 3000: ${url}/apps/ports-a/3000/]`, 'bash_tool lists the new port with its link, without a control token')
  t.notMatch(started, /\?t=/)
  t.notMatch(await bash(a, 'true'), /listening ports/, 'a port is listed once, when it starts listening')
  await bash(b, startApp(3000))
  t.same(await (await fetch(`${url}/api/apps/ports-a?t=${tokenA}`)).json(), { apps: [{ port: 3000, url: `${url}/apps/ports-a/3000/?t=${tokenA}` }] })

  // Refusals, before anything reaches the sandbox.
  t.equal((await fetch(`${base}/small`)).status, 401, 'no credential')
  t.equal((await fetch(`${base}/small?t=${tokenB}`)).status, 403, 'another chat\'s token')
  t.equal((await fetch(`${base}/small?t=${filesA}`)).status, 403, 'a files token')
  t.equal((await fetch(`${base}/small`, { headers: { Cookie: `cubicle_app=${tokenB}` } })).status, 403, 'another chat\'s cookie')
  t.equal((await fetch(`${url}/apps/ports-a/80/small?t=${tokenA}`)).status, 400, 'a port below 1024')
  t.equal((await fetch(`${url}/apps/ports-a/70000/small?t=${tokenA}`)).status, 400, 'a port above 65535')
  const cdp = await fetch(`${url}/apps/ports-a/9222/json/version?t=${tokenA}`)
  t.equal(cdp.status, 403, 'the browser\'s debugging port is the sandbox\'s own, never an app')
  t.match(await cdp.text(), /port 9222 belongs to the sandbox/)
  t.equal((await fetch(`${url}/apps/ports-a/3128/?t=${tokenA}`)).status, 403, 'nor the egress relay\'s port')
  t.equal((await fetch(`${base}/upload`, { method: 'POST', body: 'x', headers: { Cookie: `cubicle_app=${tokenA}`, Origin: 'https://evil.example' } })).status, 403, 'a write from another origin')
  const keyed = await fetch(`${base}/headers`, { headers: { Authorization: `Bearer ${TEST_API_KEY}` } })
  t.equal(keyed.status, 200, 'the API key opens it')
  const seen = await keyed.json() as { headers: Record<string, string> }
  t.equal(seen.headers.authorization, undefined, 'the key never reaches the app')
  t.equal(seen.headers.host, url.slice('http://'.length), 'the app sees the public host')
  t.equal(seen.headers['x-forwarded-prefix'], '/apps/ports-a/3000')
  t.equal(seen.headers['x-forwarded-proto'], 'http')

  // The browser: the token link sets the cookie and leaves the URL; asset, script, fetch and WebSocket work.
  const browser = await launchChromium(t)
  const context = await browser.newContext()
  const page = await context.newPage()
  await page.goto(`${base}/?t=${tokenA}`)
  t.equal(page.url(), `${base}/`, 'the token is taken out of the address')
  await page.waitForFunction('document.title === \'ws:pong\'', undefined, { timeout: 15_000 })
  t.equal(await page.evaluate('getComputedStyle(document.getElementById(\'h\')).color'), 'rgb(1, 2, 3)', 'the stylesheet at the X-Forwarded-Prefix path loaded')
  await page.waitForFunction('window.appHeaders !== undefined')
  const inPage = await page.evaluate('window.appHeaders.headers') as Record<string, string>
  t.notMatch(inPage.cookie ?? '', /cubicle_app/, 'our cookie never reaches the app')
  t.equal(inPage.referer, `${base}/`, 'a Referer inside the app passes')
  const cookies = await context.cookies()
  const ours = cookies.find(c => c.name === 'cubicle_app')
  t.same(ours && { path: ours.path, httpOnly: ours.httpOnly, sameSite: ours.sameSite }, { path: '/apps/ports-a/3000/', httpOnly: true, sameSite: 'Lax' })
  t.same(cookies.find(c => c.name === 'appsid')?.path, '/apps/ports-a/3000/', 'the app\'s cookie for / is kept under its prefix')
  t.equal(await page.evaluate('document.cookie.includes(\'cubicle_app\')'), false, 'script cannot read our cookie')

  await page.goto(`${base}/go`)
  t.equal(page.url(), `${base}/landed?from=go`, 'the redirect stays in the prefix')
  t.equal(await page.title(), 'landed')

  // The same browser is refused chat B's app: its cookie is scoped to chat A's prefix.
  const other = await page.goto(`${url}/apps/ports-b/3000/`)
  t.equal(other?.status(), 401, 'chat A\'s cookie does not open chat B')
  t.match(await page.content(), /App unavailable/, 'a navigation gets a page saying why')

  // The preview page's Apps view lists the port and opens it (a fresh browser: the view's link sets the cookie).
  const fresh = await (await browser.newContext()).newPage()
  // The view switcher shows once the page's module ran (slow on a loaded machine).
  await gotoReady(fresh, `${url}/preview/ports-a?t=${tokenA}`, async () => await fresh.waitForSelector('#view-apps', { state: 'visible', timeout: 90_000 }))
  await fresh.click('#view-apps')
  await fresh.waitForSelector('#apps-list .apps-row', { timeout: 15_000 })
  t.equal(await fresh.textContent('#apps-list .apps-port'), ':3000', 'the Apps view lists the listening port')
  t.equal(await fresh.getAttribute('#apps-list a[target="_blank"]', 'rel'), 'noopener noreferrer')
  await fresh.click('#apps-list a[target="_self"]')
  await fresh.waitForFunction('document.title === \'ws:pong\'', undefined, { timeout: 15_000 })
  t.equal(fresh.url(), `${base}/`, 'Open here shows the app in place of the page, token out of the address')
  await fresh.close()

  // Hostile answers.
  const cookie = { Cookie: `cubicle_app=${tokenA}` }
  const evil = await fetch(`${base}/evil-redirect?to=${encodeURIComponent('/apps/ports-b/3000/')}`, { headers: cookie, redirect: 'manual' })
  t.equal(evil.headers.get('location'), '/apps/ports-a/3000/apps/ports-b/3000/', 'a redirect into another chat\'s prefix stays in this one')
  const evilAbs = await fetch(`${base}/evil-redirect?to=${encodeURIComponent(`${url}/preview/ports-b`)}`, { headers: cookie, redirect: 'manual' })
  t.equal(evilAbs.headers.get('location'), '/apps/ports-a/3000/preview/ports-b')
  const set = await fetch(`${base}/cookie`, { headers: cookie })
  t.same(set.headers.getSetCookie(), ['root=1; Path=/apps/ports-a/3000/'], 'Set-Cookie for / is confined, Domain dropped, ours refused')
  const big = await fetch(`${base}/big-headers`, { headers: cookie })
  t.equal(big.status, 502, 'huge headers are refused')
  t.equal((await big.json() as { error: string }).error, 'bad_app_answer')
  const slowStart = Date.now()
  const slow = await fetch(`${base}/slow`, { headers: cookie })
  t.equal(slow.status, 504, 'a head that never comes times out')
  t.ok(Date.now() - slowStart < 10_000, `within the headers timeout (${Date.now() - slowStart} ms)`)
  t.equal((await fetch(`${base}/small`, { headers: cookie })).status, 200, 'the app still answers afterwards')
  const upload = await fetch(`${base}/upload`, { method: 'POST', body: Buffer.alloc(3_000_000, 1), headers: { ...cookie, 'Content-Type': 'application/octet-stream' } })
  t.same(await upload.json(), { received: 3_000_000 }, 'a request body is relayed whole')

  // SSE arrives event by event, not at the end.
  const sse = await fetch(`${base}/sse`, { headers: cookie })
  t.equal(sse.headers.get('content-type'), 'text/event-stream')
  const reader = (sse.body as ReadableStream<Uint8Array>).getReader()
  const sseStart = Date.now()
  const first = await reader.read()
  const firstAt = Date.now() - sseStart
  let rest = ''
  for (;;) { const { value, done } = await reader.read(); if (done) break; rest += Buffer.from(value).toString() }
  const total = Date.now() - sseStart
  t.match(Buffer.from(first.value ?? new Uint8Array()).toString(), /^data: 1 /)
  t.match(rest, /data: 5 /)
  t.ok(firstAt < total - 600, `first event after ${firstAt} ms, stream ended after ${total} ms`)

  // A WebSocket outside the browser: refused without the token, relayed with it.
  const wsBase = base.replace('http:', 'ws:')
  const refused = await new Promise<number>(resolve => {
    const ws = new WebSocket(`${wsBase}/ws`)
    ws.once('unexpected-response', (_req, res) => { resolve(res.statusCode ?? 0) })
    ws.once('error', () => {})
  })
  t.equal(refused, 401)
  const ws = new WebSocket(`${wsBase}/ws?t=${tokenB}`.replace('ports-a', 'ports-b'))
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject) })
  ws.send('hello')
  t.equal(String(await new Promise(resolve => ws.once('message', resolve))), 'echo:hello', 'chat B\'s app echoes through the relay')
  // The in-sandbox agent holds the connection: no exec relay (socat) runs for it (an image from before the
  // agent's CONNECT relays through socat: said, not failed).
  const relays = (await bash(b, 'test -f /opt/cubicle-agent/cubicle_connect.py || { echo old-image; exit 0; }; pgrep -c -x socat || true')).trim()
  if (relays === 'old-image') t.comment('the sandbox image predates the agent\'s CONNECT: the app proxy used exec relays (rebuild the image)')
  else t.equal(relays, '0', 'no socat in the sandbox while a WebSocket is open')
  ws.close()

  // (An app listening only on ::1: Docker sandboxes have no IPv6 at all, disable_ipv6; the agent's
  // fallback to ::1 is test/plugins/sandbox/agent-connect.test.ts, on the host's loopback.)

  // A stopped sandbox is never started by the proxy.
  await page.close()
  await app.sandbox.stop('ports-a')
  const stopped = await fetch(`${base}/small`, { headers: { ...cookie, Accept: 'text/html' } })
  t.equal(stopped.status, 409)
  t.match(await stopped.text(), /sandbox is stopped/)
  t.equal((await app.sandbox.status('ports-a')).state, 'stopped', 'still stopped')
  t.same(await (await fetch(`${url}/api/apps/ports-a?t=${tokenA}`)).json(), { apps: [] })
})

t.test('a paused sandbox is woken by its app URL: the same app process answers', gate, async t => {
  const { app, url } = await browserApp(t, { CONTAINER_IDLE_TIMEOUT: '1', APPS_TIMEOUT: '10' }, ['ports'])
  const c = await connect(t, url, { Authorization: `Bearer ${TEST_API_KEY}`, 'X-Chat-Id': 'ports-p' })
  const bash = async (command: string): Promise<string> => textOf(await c.callTool({ name: 'bash_tool', arguments: { command, description: 'app test' } }, undefined, { timeout: 180_000 }))
  await bash(startApp(3000))
  const pid = (await bash('pgrep -f "^node server.js 3000"')).trim()
  const cookie = { Cookie: `cubicle_app=${app.links.token('ports-p', 'c') as string}` }
  t.equal((await fetch(`${url}/apps/ports-p/3000/small`, { headers: cookie })).status, 200, 'a pooled connection exists')
  const reap = (app.sandbox as unknown as { reap: () => Promise<void> }).reap
  const deadline = Date.now() + 30_000
  while ((await app.sandbox.status('ports-p')).paused !== true && Date.now() < deadline) {
    await reap()
    await new Promise(resolve => setTimeout(resolve, 500))
  }
  t.equal((await app.sandbox.status('ports-p')).paused, true, 'the idle sandbox was paused')
  const started = Date.now()
  const res = await fetch(`${url}/apps/ports-p/3000/small`, { headers: cookie })
  t.equal(res.status, 200, `the app URL woke it (${Date.now() - started} ms)`)
  t.equal(await res.text(), 'ok')
  t.not((await app.sandbox.status('ports-p')).paused, true, 'running again')
  t.equal((await bash('pgrep -f "^node server.js 3000"')).trim(), pid, 'the same app process, not listed as new')
})
