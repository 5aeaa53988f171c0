// The CDP bridge (targets, links, the bridge itself), one group per part, all in one test process (docs/testing.md#the-unit-tiers-time).
import t from 'tap'
import { parseTargets, parseVersion, publicSocketUrl, TARGET_ID } from '../../../plugins/cdp-bridge/targets.js'
import { viewerCode } from '../../../plugins/cdp-bridge/socket-relay.js'
import { entries } from '../../../fastify.config.js'
import type { Entry } from '../../../core/app.js'
import { build, TEST_API_KEY, listen } from '../../helper.js'
import { fakeSandbox, type FakeSandbox } from './fake-sandbox.js'
import type { Test } from 'tap'
import WebSocket from 'ws'
import { entry } from '../../../core/app.js'
import capabilities from '../../../plugins/capabilities/index.js'
import cdpBridge from '../../../plugins/cdp-bridge/index.js'
import { fakeCdp, PAGE_ID, type FakeCdp } from './fake-cdp.js'

t.test('targets', async t => {
  t.test('relay URLs follow PUBLIC_BASE_URL: scheme, host, path prefix, encoded chat and token', async t => {
    t.equal(publicSocketUrl('http://cubicle.test', 'c1', 'ABC'), 'ws://cubicle.test/browser/c1/devtools/page/ABC')
    t.equal(publicSocketUrl('https://x.example:8443/cu/', 'local:a', 'ABC', 'v1.c.1.s+/'), 'wss://x.example:8443/cu/browser/local%3Aa/devtools/page/ABC?t=v1.c.1.s%2B%2F')
  })

  t.test('target ids must match the docs/contract.md#browser pattern', async t => {
    for (const ok of ['A', 'a_b-C9', 'x'.repeat(64)]) t.ok(TARGET_ID.test(ok), ok)
    for (const bad of ['', 'a.b', 'a/b', '../x', 'x'.repeat(65), 'a b', 'é']) t.notOk(TARGET_ID.test(bad), bad)
  })

  t.test('parseTargets keeps known fields of valid targets, at most max', async t => {
    const raw = [
      { id: 'p1', type: 'page', title: 't', url: 'u', webSocketDebuggerUrl: 'ws://10.0.0.1/x', devtoolsFrontendUrl: '/x', parentId: 'bad/id', attached: true },
      { id: 'p2', type: 'Page!', title: 't', url: 'u' },
      { id: 'p3', type: 'iframe', title: 't', url: 'u', parentId: 'p1' },
      { id: 'p4', type: 'page', title: 't', url: 'u' }
    ]
    t.same(parseTargets(raw, 2), [
      { id: 'p1', type: 'page', title: 't', url: 'u', attached: true },
      { id: 'p3', type: 'iframe', title: 't', url: 'u', parentId: 'p1' }
    ])
    t.throws(() => parseTargets({ length: 1 }, 10), /not an array/)
  })

  t.test('parseVersion keeps only the descriptive fields', async t => {
    t.same(parseVersion({ Browser: 'B', 'Protocol-Version': '1.3', webSocketDebuggerUrl: 'ws://x', Extra: 'y', 'User-Agent': 5 }), { Browser: 'B', 'Protocol-Version': '1.3' })
    t.throws(() => parseVersion([]), /not an object/)
  })

  t.test('close codes of the browser reach the viewer only when they may be sent', async t => {
    t.same([1000, 1001, 1009, 1011, 4001].map(viewerCode), [1000, 1001, 1009, 1011, 4001])
    t.same([1005, 1006, 1015, 999, 2000, 5000].map(viewerCode), [1011, 1011, 1011, 1011, 1011, 1011])
  })
})

t.test('links', async t => {
  const KEY = TEST_API_KEY

  // the prompt and /system-prompt give the human a way to the Browser view.
  t.test('/system-prompt sends X-Browser-URL (preview on its Browser view, control token) when cdp-bridge is loaded', async t => {
    for (const withBridge of [true, false]) {
      const fake = fakeSandbox()
      const app = await build(t, { MCP_API_KEY: KEY, PUBLIC_BASE_URL: 'https://cu.example' }, config => {
        const list: Entry[] = entries(config, ['capabilities', 'prompt-render', 'tier-http', ...(withBridge ? ['cdp-bridge' as const] : [])])
        return [list[0] as Entry, { register: async a => await a.register(fake.plugin) }, ...list.slice(1)]
      })
      const res = await app.inject({ url: '/system-prompt?chat_id=chat-a', headers: { authorization: `Bearer ${KEY}` } })
      t.equal(res.statusCode, 200)
      const header = res.headers['x-browser-url']
      if (withBridge) t.match(header, /^https:\/\/cu\.example\/preview\/chat-a\?t=v1\.c\.\d+\.[\w-]{22}#browser$/)
      else t.equal(header, undefined, 'no header without the bridge')
      t.match(res.body, /the `browser` command drives a Chromium that the user watches live and can take over in the Browser tab/)
      t.match(res.body, /<location>\n\/mnt\/skills\/public\/browser\/SKILL\.md\n<\/location>/, 'the browser skill is listed')
    }
  })
})

t.test('bridge', async t => {
  const KEY = TEST_API_KEY
  const CHAT = 'chat-a'

  interface Bridge { url: string, base: string, fake: FakeSandbox, cdp: FakeCdp, token: (chat: string, scope: 'f' | 'c') => string }

  async function bridge (t: Test, env: Record<string, string> = {}, options: Record<string, unknown> = {}): Promise<Bridge> {
    const fake = fakeSandbox()
    const cdp = await fakeCdp(t)
    fake.port.value = cdp.port
    fake.running.add(CHAT)
    const { app, url } = await listen(t, { MCP_API_KEY: KEY, PUBLIC_BASE_URL: 'https://cubicle.example/base', ...env }, config => [
      entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: '', tokenTtlSeconds: config.LINK_TOKEN_TTL, publicBaseUrl: config.publicBaseUrl }),
      { register: async a => await a.register(fake.plugin) },
      entry(cdpBridge, { cdpPort: 9222, publicBaseUrl: config.publicBaseUrl, timeoutMs: 1000, ...options })
    ])
    return { url, base: url.replace(/^http/, 'ws'), fake, cdp, token: (chat, scope) => app.links.token(chat, scope) as string }
  }

  const get = async (url: string, headers: Record<string, string> = {}): Promise<{ status: number, body: any, headers: Headers }> => {
    const res = await fetch(url, { headers })
    const text = await res.text()
    let body: unknown = text
    try { body = JSON.parse(text) } catch {}
    return { status: res.status, body, headers: res.headers }
  }

  /** Opens a WebSocket; resolves with the socket or the HTTP status that refused the handshake. */
  async function openWs (url: string, headers: Record<string, string> = {}): Promise<WebSocket | number> {
    return await new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { headers })
      ws.once('open', () => { resolve(ws) })
      ws.once('unexpected-response', (_req, res) => { resolve(res.statusCode ?? 0); res.resume() })
      ws.once('error', reject)
    })
  }

  const closed = async (ws: WebSocket): Promise<{ code: number, reason: string }> => await new Promise(resolve => {
    if (ws.readyState === WebSocket.CLOSED) { resolve({ code: -1, reason: '' }); return }
    ws.once('close', (code, reason) => { resolve({ code, reason: reason.toString() }) })
  })

  const until = async (check: () => boolean, ms = 3000): Promise<boolean> => {
    const end = Date.now() + ms
    while (Date.now() < end) { if (check()) return true; await new Promise(resolve => setTimeout(resolve, 20)) }
    return check()
  }

  t.test('status lists the pages of a running browser and is inactive otherwise', async t => {
    const b = await bridge(t)
    const auth = { Authorization: `Bearer ${b.token(CHAT, 'c')}` }
    const ok = await get(`${b.url}/browser/${CHAT}/status`, auth)
    t.equal(ok.status, 200)
    t.same(ok.body, { active: true, pages: [{ id: PAGE_ID, title: 'Agent page', url: 'http://127.0.0.1:8000/index.html' }] }, 'type page only')
    t.equal(ok.headers.get('cache-control'), 'no-cache, no-store')
    t.same(b.fake.argvs[0], ['socat', '-', 'TCP:127.0.0.1:9222,nodelay'], 'the relay runs socat inside the sandbox')
    const other = await get(`${b.url}/browser/chat-b/status`, { Authorization: `Bearer ${b.token('chat-b', 'c')}` })
    t.same(other.body, { active: false, pages: [] }, 'no running sandbox')
    b.cdp.raw = (_path, res) => { res.destroy() }
    t.same((await get(`${b.url}/browser/${CHAT}/status`, auth)).body, { active: false, pages: [] }, 'browser not answering')
    t.equal(b.fake.streams(), 0, 'every relay stream is closed')
  })

  t.test('every browser route needs a control token of that chat or the API key', async t => {
    const b = await bridge(t)
    for (const path of ['status', 'json', 'json/list', 'json/version']) {
      const url = `${b.url}/browser/${CHAT}/${path}`
      t.equal((await get(url)).status, 401, `${path} without credentials`)
      t.equal((await get(url, { Authorization: `Bearer ${b.token(CHAT, 'f')}` })).status, 403, `${path} with a files token`)
      t.equal((await get(url, { Authorization: `Bearer ${b.token('chat-b', 'c')}` })).status, 403, `${path} with another chat's token`)
      t.equal((await get(`${url}?t=${b.token(CHAT, 'c')}`)).status, 200, `${path} with the control token in t`)
      t.equal((await get(url, { Authorization: `Bearer ${KEY}` })).status, 200, `${path} with the API key`)
    }
    t.equal((await get(`${b.url}/browser/a%2Fb/status`, { Authorization: `Bearer ${KEY}` })).status, 400, 'invalid chat id')
    const pre = await fetch(`${b.url}/browser/${CHAT}/json`, { method: 'OPTIONS', headers: { origin: 'null', 'access-control-request-method': 'GET' } })
    t.equal(pre.status, 204)
    t.equal(pre.headers.get('access-control-allow-origin'), 'null', 'the preview in an opaque-origin iframe (protected mode)')
    const foreign = await get(`${b.url}/browser/${CHAT}/status?t=${b.token(CHAT, 'c')}`, { Origin: 'https://evil.example' })
    t.equal(foreign.headers.get('access-control-allow-origin'), null, 'a foreign page gets no CORS header (never *)')
  })

  t.test('open mode: no page with an opaque or foreign origin reaches the browser socket', async t => {
    const b = await bridge(t, { MCP_API_KEY: '', PUBLIC_BASE_URL: '' })
    const path = `${b.base}/browser/${CHAT}/devtools/page/${PAGE_ID}`
    const own = `http://localhost:${new URL(b.url).port}`
    t.equal(await openWs(path, { Origin: 'null' }), 403, 'null: any site\'s sandboxed iframe')
    t.equal(await openWs(path, { Origin: 'https://evil.example' }), 403, 'a foreign site')
    t.same(b.cdp.upgrades, [], 'no refused handshake reached the browser')
    for (const headers of [{ Origin: own }, {}] as Array<Record<string, string>>) {
      const ws = await openWs(path, headers)
      t.type(ws, WebSocket, `${headers.Origin ?? 'no Origin (a non-browser client)'} is accepted`)
      if (ws instanceof WebSocket) { ws.close(); await closed(ws) }
    }
    const status = await get(`${b.url}/browser/${CHAT}/status`, { Origin: 'null' })
    t.equal(status.headers.get('access-control-allow-origin'), null, 'status: no CORS for null in open mode')
  })

  t.test('json rewrites socket URLs to the public host with the token and leaks no internal address', async t => {
    const b = await bridge(t)
    const token = b.token(CHAT, 'c')
    const res = await get(`${b.url}/browser/${CHAT}/json?t=${token}`)
    t.equal(res.status, 200)
    t.equal(res.body.length, 2)
    t.equal(res.body[0].webSocketDebuggerUrl, `wss://cubicle.example/base/browser/${CHAT}/devtools/page/${PAGE_ID}?t=${encodeURIComponent(token)}`)
    t.notOk('devtoolsFrontendUrl' in res.body[0])
    t.notOk('faviconUrl' in res.body[0])
    const body = JSON.stringify(res.body)
    t.notOk(body.includes(`:${b.cdp.port}`) || body.includes('10.0.0.7'), 'no address of the browser endpoint or other internal host')
    const byKey = await get(`${b.url}/browser/${CHAT}/json/list`, { Authorization: `Bearer ${KEY}` })
    t.equal(byKey.body[0].webSocketDebuggerUrl, `wss://cubicle.example/base/browser/${CHAT}/devtools/page/${PAGE_ID}`, 'no token in the URL when the key was used')
    const version = await get(`${b.url}/browser/${CHAT}/json/version`, { Authorization: `Bearer ${KEY}` })
    t.same(version.body, { Browser: 'Chrome/156.0.0.0', 'Protocol-Version': '1.3', 'User-Agent': 'UA' })
  })

  t.test('json answers 404 without a running sandbox and 503 when the browser fails', async t => {
    const b = await bridge(t)
    const auth = { Authorization: `Bearer ${KEY}` }
    const missing = await get(`${b.url}/browser/chat-b/json`, auth)
    t.equal(missing.status, 404)
    t.equal(missing.body.error, 'sandbox_not_running')
    const cases: Array<[string, FakeCdp['raw']]> = [
      ['connection refused', (_p, res) => { res.socket?.destroy() }],
      ['garbage', (_p, res) => { res.end('<html>not json') }],
      ['HTTP 500', (_p, res) => { res.statusCode = 500; res.end('[]') }],
      ['not a list', (_p, res) => { res.end('{"a":1}') }],
      ['an answer over the cap', (_p, res) => { res.end(`["${'x'.repeat(2 * 1024 * 1024)}"]`) }],
      ['silence', () => {}]
    ]
    for (const [name, raw] of cases) {
      b.cdp.raw = raw
      const started = Date.now()
      const res = await get(`${b.url}/browser/${CHAT}/json`, auth)
      t.equal(res.status, 503, name)
      t.equal(res.body.error, 'browser_unavailable', name)
      t.ok(Date.now() - started < 2500, `${name}: answered within the timeout`)
    }
    t.ok(await until(() => b.fake.streams() === 0), 'no relay stream left open')
  })

  t.test('targets with ids outside the pattern are dropped and strings are bounded', async t => {
    const b = await bridge(t)
    b.cdp.list = [
      { id: '../../etc', type: 'page', title: 'x', url: 'y' },
      { id: 'ok_1', type: 'page', title: 'T'.repeat(5000), url: 'u', extra: 'z' },
      { id: 'ok_2', type: 'page', title: 7, url: null },
      'nonsense', null, [1]
    ]
    const res = await get(`${b.url}/browser/${CHAT}/json`, { Authorization: `Bearer ${KEY}` })
    t.same(res.body.map((x: { id: string }) => x.id), ['ok_1', 'ok_2'])
    t.equal(res.body[0].title.length, 1024)
    t.notOk('extra' in res.body[0])
    t.equal(res.body[1].title, '')
  })

  t.test('the socket relays CDP both ways after auth and origin checks before the upgrade', async t => {
    const b = await bridge(t, { ALLOWED_ORIGINS: 'https://chat.example' })
    const token = b.token(CHAT, 'c')
    const path = `${b.base}/browser/${CHAT}/devtools/page/${PAGE_ID}`
    t.equal(await openWs(path), 401, 'no credentials')
    t.equal(await openWs(`${path}?t=${b.token(CHAT, 'f')}`), 403, 'files token')
    t.equal(await openWs(`${path}?t=${b.token('chat-b', 'c')}`), 403, "another chat's token")
    t.equal(await openWs(`${path}?t=${token}`, { Origin: 'https://evil.example' }), 403, 'bad origin')
    t.equal(await openWs(`${b.base}/browser/${CHAT}/devtools/page/bad.id?t=${token}`), 400, 'bad target id')
    t.equal(await openWs(`${b.base}/browser/chat-b/devtools/page/${PAGE_ID}?t=${b.token('chat-b', 'c')}`), 404, 'no sandbox')
    t.same(b.cdp.upgrades, [], 'no refused handshake reached the browser')

    for (const origin of [undefined, 'null', 'https://cubicle.example', 'https://chat.example']) {
      const ws = await openWs(`${path}?t=${token}`, origin === undefined ? {} : { Origin: origin })
      t.type(ws, WebSocket, `origin ${origin ?? '(none)'} is accepted`)
      if (ws instanceof WebSocket) ws.close()
    }

    const ws = await openWs(`${path}?t=${token}`) as WebSocket
    const reply = new Promise<any>(resolve => ws.once('message', data => resolve(JSON.parse(data.toString()))))
    ws.send(JSON.stringify({ id: 7, method: 'Runtime.evaluate', params: { expression: 'location.href' } }))
    t.same(await reply, { id: 7, result: { result: { type: 'string', value: 'http://127.0.0.1:8000/index.html' } } })
    t.equal(b.cdp.lastHeaders?.origin, undefined, 'the backend handshake carries no Origin')
    t.equal(b.fake.leases(), 1, 'an open socket holds a lease')

    const binary = Buffer.from([0, 1, 2, 255, 254])
    const echoed = new Promise<[Buffer, boolean]>(resolve => ws.once('message', (data, isBinary) => resolve([data as Buffer, isBinary])))
    ws.send(binary, { binary: true })
    const [data, isBinary] = await echoed
    t.ok(isBinary, 'binary stays binary')
    t.same([...data], [...binary])

    const done = closed(ws)
    ws.send(JSON.stringify({ id: 8, method: 'Test.close' }))
    t.same(await done, { code: 4001, reason: 'browser closed the connection' }, 'the browser closing closes the viewer with its code')
    t.ok(await until(() => b.fake.leases() === 0 && b.fake.streams() === 0), 'lease released and relay closed')
  })

  t.test('a viewer closing closes the backend; a stopped sandbox closes viewers with 1001', async t => {
    const b = await bridge(t)
    const url = `${b.base}/browser/${CHAT}/devtools/page/${PAGE_ID}?t=${b.token(CHAT, 'c')}`
    const first = await openWs(url) as WebSocket
    t.ok(await until(() => b.cdp.sockets.size === 1))
    first.close()
    t.ok(await until(() => b.cdp.sockets.size === 0), 'backend closed with the viewer')
    const second = await openWs(url) as WebSocket
    t.ok(await until(() => b.cdp.sockets.size === 1))
    const done = closed(second)
    b.fake.stop(CHAT)
    t.equal((await done).code, 1001)
    t.ok(await until(() => b.fake.leases() === 0 && b.fake.streams() === 0))
  })

  t.test('backend connect failure closes the viewer with 1011', async t => {
    const b = await bridge(t)
    b.fake.port.value = 1 // nothing listens there
    const ws = await openWs(`${b.base}/browser/${CHAT}/devtools/page/${PAGE_ID}?t=${b.token(CHAT, 'c')}`) as WebSocket
    t.equal((await closed(ws)).code, 1011)
    t.ok(await until(() => b.fake.leases() === 0))
  })

  t.test('the per-chat viewer cap refuses the next handshake with 429 and frees slots on close', async t => {
    const b = await bridge(t, {}, { maxViewersPerChat: 2 })
    const url = `${b.base}/browser/${CHAT}/devtools/page/${PAGE_ID}?t=${b.token(CHAT, 'c')}`
    const one = await openWs(url) as WebSocket
    const two = await openWs(url) as WebSocket
    t.equal(await openWs(url), 429)
    one.close()
    await closed(one)
    const three = await openWs(url)
    t.type(three, WebSocket, 'a slot is free again')
    for (const ws of [two, three]) if (ws instanceof WebSocket) ws.close()
  })

  t.test('the server-wide viewer cap applies across chats', async t => {
    const b = await bridge(t, {}, { maxViewers: 1 })
    b.fake.running.add('chat-b')
    const first = await openWs(`${b.base}/browser/${CHAT}/devtools/page/${PAGE_ID}?t=${b.token(CHAT, 'c')}`) as WebSocket
    t.equal(await openWs(`${b.base}/browser/chat-b/devtools/page/${PAGE_ID}?t=${b.token('chat-b', 'c')}`), 429, 'another chat is refused while the server is full')
    first.close()
  })
})
