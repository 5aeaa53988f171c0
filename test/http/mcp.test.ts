// /mcp over real HTTP with the SDK client: the transport, sessions, SSE and the Origin rule, one group per part, all in one test process (docs/testing.md#the-unit-tiers-time); mcp-modern.test.ts (the 2026-07-28 leg, another SDK) stays on its own.
import t from 'tap'
import { ProgressNotificationSchema, type Progress } from '@modelcontextprotocol/sdk/types.js'
import { listen, TEST_API_KEY } from '../helper.js'
import { connect, kernelManifest, textOf, type Probe } from '../fixtures/mcp-probe.js'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { request } from 'node:http'

t.test('mcp-transport', async t => {
  const KEY = TEST_API_KEY
  const newProbe = (): Probe => ({ calls: [], aborted: [] })

  async function rpc (url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
    return await fetch(new URL('/mcp', url), {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body)
    })
  }

  t.test('initialize returns serverInfo, capabilities and per-chat instructions', async t => {
    const { url } = await listen(t, {}, kernelManifest(newProbe()))
    const client = await connect(t, url, { 'X-Chat-Id': 'Chat-A' })
    t.equal(client.getServerVersion()?.name, 'computer-use-mcp')
    t.match(client.getServerVersion()?.version, /^\d+\.\d+\.\d+/)
    t.same(client.getServerCapabilities()?.tools, { listChanged: false })
    t.same(client.getServerCapabilities()?.resources, { subscribe: false, listChanged: true })
    t.equal(client.getInstructions(), 'instructions for chat-a')
  })

  t.test('strict mode without a chat falls back to the lower-priority instructions', async t => {
    const { url } = await listen(t, { SINGLE_USER_MODE: 'false' }, kernelManifest(newProbe()))
    const client = await connect(t, url)
    t.equal(client.getInstructions(), 'static instructions')
  })

  t.test('tools/list and tools/call work without initialize and with a stale session id', async t => {
    const { url } = await listen(t, {}, kernelManifest(newProbe()))
    const headers = { 'x-chat-id': 'c1', 'mcp-session-id': 'stale-session-that-never-existed' }
    const list = await rpc(url, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, headers)
    t.equal(list.status, 200)
    t.equal(list.headers.get('mcp-session-id'), null, 'only initialize hands out a session id')
    const body = await list.json() as { result: { tools: Array<{ name: string }> } }
    t.same(body.result.tools.map(x => x.name), ['whoami', 'slow', 'boom'])
    const call = await rpc(url, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'whoami', arguments: {} } }, { ...headers, accept: 'application/json' })
    t.equal(call.headers.get('content-type')?.startsWith('application/json'), true, 'JSON reply when Accept lacks text/event-stream')
    t.match(await call.json(), { result: { content: [{ text: /"chatId":"c1"/ }] } })
  })

  t.test('tools/call with Accept text/event-stream answers as SSE, progress included', async t => {
    const { url } = await listen(t, {}, kernelManifest(newProbe()))
    const res = await rpc(url, { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'slow', arguments: { ms: 10 }, _meta: { progressToken: 'p1' } } }, { 'x-chat-id': 'c1' })
    t.equal(res.headers.get('content-type'), 'text/event-stream')
    t.equal(res.headers.get('cache-control'), 'no-cache, no-transform')
    t.equal(res.headers.get('x-accel-buffering'), 'no')
    const text = await res.text()
    const events = text.split('\n\n').filter(e => e.startsWith('event: message'))
    t.equal(events.length, 2, 'one progress notification, then the result')
    t.match(events[0], /notifications\/progress.*"progressToken":"p1"/)
    t.match(events[1], /"text":"done".*"id":7/)
  })

  t.test('the SDK client observes progress notifications', async t => {
    const { url } = await listen(t, {}, kernelManifest(newProbe()))
    const client = await connect(t, url, { 'X-Chat-Id': 'c1' })
    const seen: Progress[] = []
    const result = await client.callTool({ name: 'slow', arguments: { ms: 20 } }, undefined, { onprogress: p => { seen.push(p) } })
    t.equal(textOf(result), 'done')
    t.match(seen, [{ progress: 1, total: 2, message: 'started' }])
    t.ok(ProgressNotificationSchema)
  })

  t.test('authentication: bearer accepted, wrong or absent refused with 401 before parsing', async t => {
    const { url } = await listen(t, { MCP_API_KEY: KEY }, kernelManifest(newProbe()))
    const ok = await connect(t, url, { Authorization: `bearer   ${KEY}  `, 'X-Chat-Id': 'c1' })
    t.equal(textOf(await ok.callTool({ name: 'whoami', arguments: {} })).includes('"chatId":"c1"'), true)
    for (const auth of [undefined, 'Bearer wrong', `Basic ${KEY}`, KEY]) {
      const res = await rpc(url, '{not json', auth === undefined ? {} : { authorization: auth })
      t.equal(res.status, 401, `refused: ${String(auth)}`)
      t.equal(res.headers.get('www-authenticate'), 'Bearer')
      t.equal(await res.text(), '{"error": "Unauthorized"}')
    }
    const info = await fetch(new URL('/mcp-info', url))
    t.equal(info.status, 401)
    const info2 = await fetch(new URL('/mcp-info', url), { headers: { authorization: `Bearer ${KEY}` } })
    t.match(await info2.json(), { name: 'computer-use-mcp', tools: [{ name: 'whoami' }], headers: { required: ['X-Chat-Id'] } })
  })

  t.test('repeated failures from one address are throttled with 429 and Retry-After', async t => {
    const { url } = await listen(t, { MCP_API_KEY: KEY }, kernelManifest(newProbe()))
    let last: Response | undefined
    for (let i = 0; i < 31; i++) last = await rpc(url, {}, { authorization: 'Bearer nope' })
    t.equal(last?.status, 429)
    t.ok(Number(last?.headers.get('retry-after')) > 0)
  })

  t.test('header aliases, precedence, trimming and lowercasing', async t => {
    const { url } = await listen(t, {}, kernelManifest(newProbe()))
    const cases: Array<[Record<string, string>, string]> = [
      [{ 'X-Chat-Id': '  My-Chat  ' }, 'my-chat'],
      [{ 'X-OpenWebUI-Chat-Id': 'A1B2C3D4-E5F6-7890-ABCD-EF1234567890' }, 'a1b2c3d4-e5f6-7890-abcd-ef1234567890'],
      [{ 'X-Chat-Id': 'direct', 'X-OpenWebUI-Chat-Id': 'alias' }, 'direct'],
      [{ 'X-Chat-Id': '  ', 'X-OpenWebUI-Chat-Id': 'alias' }, 'alias']
    ]
    for (const [headers, expected] of cases) {
      const client = await connect(t, url, { ...headers, 'X-OpenWebUI-User-Email': 'ann@example.com', 'X-User-Name': 'Ann%20Lee' })
      const seen = JSON.parse(textOf(await client.callTool({ name: 'whoami', arguments: {} }))) as Record<string, unknown>
      t.equal(seen.chatId, expected)
      t.equal(seen.email, 'ann@example.com')
      t.equal(seen.name, 'Ann Lee')
    }
  })

  t.test('invalid chat ids never reach a tool', async t => {
    const probe = newProbe()
    const { url } = await listen(t, {}, kernelManifest(probe))
    for (const bad of ['..x', 'a/b', 'a b', 'a.b', '-abc', '_x', 'é', 'x'.repeat(65)]) {
      const client = await connect(t, url, { 'X-Chat-Id': bad })
      const result = await client.callTool({ name: 'whoami', arguments: {} })
      t.equal(result.isError, true, bad)
      t.match(textOf(result), /^Error: invalid chat id/)
      t.same((await client.listResources()).resources, [])
      await t.rejects(client.readResource({ uri: 'file://uploads/x/a.txt' }), { code: -32602, data: { uri: 'file://uploads/x/a.txt' } })
    }
    t.same(probe.calls, [])
  })

  t.test('SINGLE_USER_MODE lenient: no header means chat default plus the note; explicit default gets no note', async t => {
    const { url } = await listen(t, {}, kernelManifest(newProbe()))
    const none = await connect(t, url)
    const text = textOf(await none.callTool({ name: 'whoami', arguments: {} }))
    t.match(text, /"chatId":"default"/)
    t.match(text, /\n\n---\nNote:/)
    t.match(text, /SINGLE_USER_MODE/)
    t.match(text, /X-Chat-Id/)
    const explicit = await connect(t, url, { 'X-Chat-Id': 'default' })
    t.notMatch(textOf(await explicit.callTool({ name: 'whoami', arguments: {} })), /Note:/)
  })

  t.test('SINGLE_USER_MODE=true ignores the header, even an invalid one', async t => {
    const { url } = await listen(t, { SINGLE_USER_MODE: 'TRUE ' }, kernelManifest(newProbe()))
    const client = await connect(t, url, { 'X-Chat-Id': 'not valid!' })
    const text = textOf(await client.callTool({ name: 'whoami', arguments: {} }))
    t.match(text, /"chatId":"default"/)
    t.notMatch(text, /Note:/)
  })

  t.test('SINGLE_USER_MODE=false requires the header and runs nothing without it', async t => {
    const probe = newProbe()
    const { url } = await listen(t, { SINGLE_USER_MODE: 'false' }, kernelManifest(probe))
    const client = await connect(t, url)
    const result = await client.callTool({ name: 'whoami', arguments: {} })
    t.equal(result.isError, true)
    t.match(textOf(result), /^Error: X-Chat-Id header is required \(SINGLE_USER_MODE=false\)\./)
    t.same(probe.calls, [])
    const explicit = await connect(t, url, { 'X-Chat-Id': 'default' })
    t.notOk((await explicit.callTool({ name: 'whoami', arguments: {} })).isError)
  })

  t.test('argument validation: coercion, defaults, readable errors; unknown tool is a protocol error', async t => {
    const { url } = await listen(t, {}, kernelManifest(newProbe()))
    const client = await connect(t, url, { 'X-Chat-Id': 'c1' })
    t.match(textOf(await client.callTool({ name: 'whoami', arguments: { n: '42', extra: 'ignored' } })), /"n":42/)
    t.match(textOf(await client.callTool({ name: 'whoami', arguments: {} })), /"n":1/)
    const bad = await client.callTool({ name: 'slow', arguments: { ms: 'soon' } })
    t.equal(bad.isError, true)
    t.match(textOf(bad), /^Error: invalid arguments: .*ms/)
    await t.rejects(client.callTool({ name: 'nope', arguments: {} }), { code: -32602 })
    const unknown = await rpc(url, { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'nope', arguments: {} } }, { 'x-chat-id': 'c1', accept: 'application/json' })
    t.match(await unknown.json(), { id: 4, error: { code: -32602, message: 'Unknown tool: nope' } }, 'the wire message carries no "MCP error -32602:" prefix for clients to double')
    const missing = await rpc(url, { jsonrpc: '2.0', id: 5, method: 'resources/read', params: { uri: 'file://uploads/c1/none' } }, { 'x-chat-id': 'c1' })
    t.match(await missing.json(), { id: 5, error: { code: -32602, message: 'Resource not found', data: { uri: 'file://uploads/c1/none' } } })
    const malformed = await rpc(url, { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'whoami', arguments: 'x' } }, { 'x-chat-id': 'c1' })
    t.match(await malformed.json(), { id: 3, error: { code: -32602 } })
  })

  t.test('unexpected tool errors become isError with a reference, never a stack or path', async t => {
    const { url } = await listen(t, {}, kernelManifest(newProbe()))
    const client = await connect(t, url, { 'X-Chat-Id': 'c1' })
    const result = await client.callTool({ name: 'boom', arguments: {} })
    t.equal(result.isError, true)
    t.match(textOf(result), /^Error: internal error \(ref [\w-]+\)$/)
    t.notMatch(JSON.stringify(result), /\.ts:\d+|secret/)
  })

  t.test('notifications and responses get 202 with an empty body', async t => {
    const { url } = await listen(t, {}, kernelManifest(newProbe()))
    for (const body of [{ jsonrpc: '2.0', method: 'notifications/initialized' }, { jsonrpc: '2.0', id: 9, result: {} }]) {
      const res = await rpc(url, body)
      t.equal(res.status, 202)
      t.equal(await res.text(), '')
    }
  })

  t.test('notifications/cancelled from another request aborts the running call and no result is sent', async t => {
    const probe = newProbe()
    const { url } = await listen(t, {}, kernelManifest(probe))
    const running = rpc(url, { jsonrpc: '2.0', id: 'call-1', method: 'tools/call', params: { name: 'slow', arguments: { ms: 30000 } } }, { 'x-chat-id': 'c9' })
    const started = Date.now()
    while (probe.calls.length === 0 && Date.now() - started < 5000) await new Promise(resolve => setTimeout(resolve, 10))
    const other = await rpc(url, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'call-1' } }, { 'x-chat-id': 'other' })
    t.equal(other.status, 202)
    t.same(probe.aborted, [], 'a cancel from another chat does nothing')
    await rpc(url, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'call-1' } }, { 'x-chat-id': 'c9' })
    const res = await running
    t.notMatch(await res.text(), /"result"/)
    t.same(probe.aborted, ['c9'])
    t.ok(Date.now() - started < 10000)
  })

  t.test('per-chat concurrency cap answers excess calls with an isError result', async t => {
    const probe = newProbe()
    const { url } = await listen(t, {}, kernelManifest(probe))
    const call = async (id: number, chat: string): Promise<string> =>
      await rpc(url, { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'slow', arguments: { ms: 30000 } } }, { 'x-chat-id': chat, accept: 'application/json' }).then(async r => await r.text())
    // Eight calls that run until cancelled, then a ninth: deterministic however loaded the machine is.
    const running = Array.from({ length: 8 }, async (_, i) => await call(i, 'busy'))
    const started = Date.now()
    while (probe.calls.length < 8 && Date.now() - started < 20000) await new Promise(resolve => setTimeout(resolve, 10))
    t.match(await call(99, 'busy'), /too many concurrent calls for this chat/)
    t.match(await rpc(url, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'whoami', arguments: {} } }, { 'x-chat-id': 'other', accept: 'application/json' }).then(async r => await r.text()), /chatId\\":\\"other/, 'other chats are not affected')
    for (let i = 0; i < 8; i++) await rpc(url, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: i } }, { 'x-chat-id': 'busy' })
    await Promise.all(running)
    t.equal(probe.aborted.length, 8)
  })

  t.test('HTTP surface of /mcp: methods, Accept, protocol version, batches, body limits, origin', async t => {
    const { url } = await listen(t, { PUBLIC_BASE_URL: 'https://cu.example.com/', ALLOWED_ORIGINS: 'https://chat.example.com', MCP_MAX_BODY_BYTES: '2k' }, kernelManifest(newProbe()))
    const mcp = new URL('/mcp', url)
    t.equal((await fetch(mcp, { method: 'DELETE' })).status, 204)
    const put = await fetch(mcp, { method: 'PUT' })
    t.equal(put.status, 405)
    t.equal(put.headers.get('allow'), 'GET, POST, DELETE')
    t.equal((await fetch(mcp, { method: 'GET' })).status, 406)
    t.equal((await rpc(url, { jsonrpc: '2.0', id: 1, method: 'ping' }, { accept: 'text/html' })).status, 406)
    const noAccept = await fetch(mcp, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }) })
    t.same(await noAccept.json(), { jsonrpc: '2.0', id: 1, result: {} })
    const slash = await fetch(new URL('/mcp/', url), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'prompts/list' }) })
    t.same(await slash.json(), { jsonrpc: '2.0', id: 1, result: { prompts: [] } })
    t.match(await (await rpc(url, { jsonrpc: '2.0', id: 1, method: 'resources/templates/list' })).json(), { result: { resourceTemplates: [] } })
    t.match(await (await rpc(url, { jsonrpc: '2.0', id: 1, method: 'resources/subscribe', params: { uri: 'x' } })).json(), { error: { code: -32601 } })
    const version = await rpc(url, { jsonrpc: '2.0', id: 1, method: 'ping' }, { 'mcp-protocol-version': '1999-01-01' })
    t.equal(version.status, 400)
    t.match(await version.json(), { error: { code: -32600 } })
    t.equal((await rpc(url, { jsonrpc: '2.0', id: 1, method: 'ping' }, { 'mcp-protocol-version': '2024-11-05' })).status, 200)
    const batch = await rpc(url, [{ jsonrpc: '2.0', id: 1, method: 'ping' }])
    t.equal(batch.status, 400)
    t.match(await batch.json(), { error: { code: -32600 } })
    const parse = await rpc(url, '{"jsonrpc":')
    t.equal(parse.status, 400)
    t.same(await parse.json(), { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error: the body is not valid JSON' } })
    t.equal((await rpc(url, { jsonrpc: '2.0', id: 1, method: 'ping', params: { pad: 'x'.repeat(4000) } })).status, 413)
    t.equal((await fetch(mcp, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'x' })).status, 415)
    t.equal((await rpc(url, { jsonrpc: '2.0', id: 1, method: 'ping' }, { origin: 'https://evil.example' })).status, 403)
    const own = await rpc(url, { jsonrpc: '2.0', id: 1, method: 'ping' }, { origin: 'https://cu.example.com' })
    t.equal(own.status, 200)
    t.equal(own.headers.get('access-control-allow-origin'), null, 'no CORS for the own origin')
    const cors = await rpc(url, { jsonrpc: '2.0', id: 1, method: 'ping' }, { origin: 'https://chat.example.com' })
    t.equal(cors.headers.get('access-control-allow-origin'), 'https://chat.example.com')
    t.equal(cors.headers.get('access-control-expose-headers'), 'WWW-Authenticate, Mcp-Session-Id')
    const preflight = await fetch(mcp, { method: 'OPTIONS', headers: { origin: 'https://chat.example.com', 'access-control-request-method': 'POST' } })
    t.equal(preflight.status, 204)
    t.match(preflight.headers.get('access-control-allow-headers'), /MCP-Protocol-Version.*X-Chat-Id.*X-OpenWebUI-Mcp-Servers/)
  })

  t.test('GET /mcp stream delivers chat notifications and keep-alives', async t => {
    const { app, url } = await listen(t, { PROGRESS_INTERVAL_SECONDS: '1' }, kernelManifest(newProbe()))
    const controller = new AbortController()
    t.teardown(() => controller.abort())
    const res = await fetch(new URL('/mcp', url), { headers: { accept: 'text/event-stream', 'x-chat-id': 'stream-chat' }, signal: controller.signal })
    t.equal(res.headers.get('content-type'), 'text/event-stream')
    const reader = res.body!.getReader()
    let seen = ''
    const readUntil = async (pattern: RegExp): Promise<void> => {
      while (!pattern.test(seen)) {
        const { value, done } = await reader.read()
        if (done) break
        seen += Buffer.from(value).toString('utf8')
      }
    }
    await readUntil(/stream open/)
    t.equal(app.mcp.notifyChat('other-chat', { method: 'notifications/resources/list_changed' }), 0)
    t.equal(app.mcp.notifyChat('stream-chat', { method: 'notifications/resources/list_changed' }), 1)
    await readUntil(/list_changed/)
    t.match(seen, /event: message\ndata: {"jsonrpc":"2.0","method":"notifications\/resources\/list_changed"}/)
    await readUntil(/: keep-alive/)
    t.match(seen, /: keep-alive/)
  })

  t.test('every response carries X-Request-Id and Referrer-Policy; HEAD works on GET routes', async t => {
    const { url } = await listen(t, {}, kernelManifest(newProbe()))
    const res = await fetch(new URL('/health', url), { headers: { 'x-request-id': 'abc-123' } })
    t.same(await res.json(), { status: 'healthy' })
    t.equal(res.headers.get('x-request-id'), 'abc-123')
    t.equal(res.headers.get('referrer-policy'), 'no-referrer')
    t.equal((await fetch(new URL('/health', url), { method: 'HEAD' })).status, 200)
    const missing = await fetch(new URL('/nope', url))
    t.equal(missing.status, 404)
    t.match(await missing.json(), { error: 'not_found' })
    const ready = await fetch(new URL('/ready', url))
    t.same(await ready.json(), { status: 'ready', probe: 'ok' })
  })

  t.test('a running tools/call stream carries keep-alive comments whether or not progress was asked for', async t => {
    const { url } = await listen(t, { PROGRESS_INTERVAL_SECONDS: '1' }, kernelManifest(newProbe()))
    const res = await rpc(url, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'slow', arguments: { ms: 2300 } } }, { 'x-chat-id': 'ka' })
    const text = await res.text()
    t.ok(text.split(': keep-alive\n\n').length - 1 >= 2, 'a comment every interval while the call runs')
    t.notMatch(text, /notifications\/progress/, 'no progress without a token')
    t.match(text, /"text":"done"/)
  })

  t.test('capability-style tokens are not accepted on /mcp, only the API key', async t => {
    const { url } = await listen(t, { MCP_API_KEY: KEY }, kernelManifest(newProbe()))
    const res = await rpc(url, { jsonrpc: '2.0', id: 1, method: 'ping' }, { authorization: 'Bearer v1.c.9999999999.AAAAAAAAAAAAAAAAAAAAAA' })
    t.equal(res.status, 401)
  })
})

t.test('mcp-session', async t => {
// Stateless but session-friendly (docs/contract.md#transport): initialize hands out a random
// Mcp-Session-Id that is stored nowhere; any or no session id on later requests is fine.

  const INIT = { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'smoke', version: '1' } } }
  const JSON_AND_SSE = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }

  async function post (url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
    return await fetch(new URL('/mcp', url), { method: 'POST', headers: { ...JSON_AND_SSE, ...headers }, body: JSON.stringify(body) })
  }

  /** The result of a reply, whether it came as JSON or as SSE. */
  async function resultOf (res: Response): Promise<unknown> {
    const text = await res.text()
    if (!(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) return (JSON.parse(text) as { result: unknown }).result
    const data = text.split('\n').filter(l => l.startsWith('data: {')).map(l => JSON.parse(l.slice(6)) as { result?: unknown })
    return data.find(m => m.result !== undefined)?.result
  }

  t.test('initialize answers with a fresh random Mcp-Session-Id; other requests get none', async t => {
    const { url } = await listen(t, {}, kernelManifest({ calls: [], aborted: [] }))
    const ids = new Set<string>()
    for (let i = 0; i < 3; i++) {
      const res = await post(url, INIT)
      t.equal(res.status, 200)
      const id = res.headers.get('mcp-session-id') ?? ''
      t.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.2025-06-18$/, 'a random UUID tagged with the negotiated version (visible ASCII, as the spec asks)')
      ids.add(id)
      await res.text()
    }
    t.equal(ids.size, 3, 'a new id per initialize')
    const ping = await post(url, { jsonrpc: '2.0', id: 1, method: 'ping' })
    t.equal(ping.headers.get('mcp-session-id'), null)
  })

  t.test('a reference-style client that echoes the id on every request keeps working, before and after DELETE', async t => {
    const probe = { calls: [], aborted: [] }
    const { url } = await listen(t, {}, kernelManifest(probe))
    const init = await post(url, INIT, { 'x-chat-id': 'smoke' })
    const sid = init.headers.get('mcp-session-id')
    t.ok(sid, 'the smoke script finds its session id')
    const h = { 'mcp-session-id': sid ?? '', 'mcp-protocol-version': '2025-06-18', 'x-chat-id': 'smoke' }
    t.equal((await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h)).status, 202)
    const tools = await resultOf(await post(url, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, h)) as { tools: Array<{ name: string }> }
    t.same(tools.tools.map(x => x.name), ['whoami', 'slow', 'boom'])
    const call = await resultOf(await post(url, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'whoami', arguments: {} } }, h))
    t.match(textOf(call), /"chatId":"smoke"/)
    const stream = await fetch(new URL('/mcp', url), { headers: { accept: 'text/event-stream', ...h } })
    t.equal(stream.status, 200, 'GET stream with the session id')
    await stream.body?.cancel()
    const del = await fetch(new URL('/mcp', url), { method: 'DELETE', headers: h })
    t.equal(del.status, 204)
    const after = await post(url, { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'whoami', arguments: {} } }, h)
    t.equal(after.status, 200, 'the "terminated" id is still accepted: nothing was stored, nothing is 404')
    t.match(textOf(await resultOf(after)), /"chatId":"smoke"/)
    for (const stale of ['invented', 'x'.repeat(200), '00000000-0000-0000-0000-000000000000']) {
      const res = await post(url, { jsonrpc: '2.0', id: 4, method: 'tools/list' }, { ...h, 'mcp-session-id': stale })
      t.equal(res.status, 200, `session id '${stale.slice(0, 20)}' is processed normally`)
      await res.text()
    }
  })

  t.test('the SDK client stores the id, sends it back, terminates with DELETE and keeps working', async t => {
    const { url } = await listen(t, {}, kernelManifest({ calls: [], aborted: [] }))
    const seen: Array<{ method: string, sid: string | null, status: number }> = []
    const recordingFetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
      const res = await fetch(input, init)
      seen.push({ method: init?.method ?? 'GET', sid: new Headers(init?.headers).get('mcp-session-id'), status: res.status })
      return res
    }
    const transport = new StreamableHTTPClientTransport(new URL('/mcp', url), { fetch: recordingFetch, requestInit: { headers: { 'X-Chat-Id': 'sdk-s' } } })
    const client = new Client({ name: 'cubicle-test', version: '0.0.0' })
    t.teardown(async () => { await client.close() })
    await client.connect(transport)
    const sid = transport.sessionId
    t.match(sid, /^[0-9a-f-]{36}\.2025-11-25$/, 'the SDK picked the id up from the initialize answer')
    t.match(textOf(await client.callTool({ name: 'whoami', arguments: {} })), /"chatId":"sdk-s"/)
    t.ok(seen.slice(1).every(r => r.sid === sid), 'every later request carried it')
    await transport.terminateSession()
    t.same(seen.at(-1), { method: 'DELETE', sid, status: 204 })
    t.equal(transport.sessionId, undefined)
    t.match(textOf(await client.callTool({ name: 'whoami', arguments: {} })), /"chatId":"sdk-s"/, 'works on without a session id')
  })

  t.test('an SDK client resuming with a session id this process never issued (e.g. after a restart) works', async t => {
    const { url } = await listen(t, {}, kernelManifest({ calls: [], aborted: [] }))
    const transport = new StreamableHTTPClientTransport(new URL('/mcp', url), { sessionId: 'from-a-previous-server-process', requestInit: { headers: { 'X-Chat-Id': 'resumed' } } })
    const client = new Client({ name: 'cubicle-test', version: '0.0.0' })
    t.teardown(async () => { await client.close() })
    await client.connect(transport)
    t.match(textOf(await client.callTool({ name: 'whoami', arguments: {} })), /"chatId":"resumed"/)
    t.same((await client.listResources()).resources.map(r => r.name), ['a.txt'])
  })

  t.test('a browser client on an ALLOWED_ORIGINS origin can read the session id (CORS exposes it)', async t => {
    const { url } = await listen(t, { ALLOWED_ORIGINS: 'https://chat.example.com' }, kernelManifest({ calls: [], aborted: [] }))
    const res = await post(url, INIT, { origin: 'https://chat.example.com' })
    t.ok(res.headers.get('mcp-session-id'))
    t.equal(res.headers.get('access-control-allow-origin'), 'https://chat.example.com')
    t.match(res.headers.get('access-control-expose-headers'), /(^|, )Mcp-Session-Id(,|$)/)
    const preflight = await fetch(new URL('/mcp', url), { method: 'OPTIONS', headers: { origin: 'https://chat.example.com', 'access-control-request-method': 'POST', 'access-control-request-headers': 'mcp-session-id' } })
    t.equal(preflight.status, 204)
    t.match(preflight.headers.get('access-control-allow-headers'), /Mcp-Session-Id/)
  })
})

t.test('mcp-sse', async t => {
// SSE framing of /mcp (docs/contract.md#reply-format): a POST stream starts with a priming event (an id
// and empty data) and carries a retry field (protocol 2025-11-25, SEP-1699).

  const PRIMING = /^id: [A-Za-z0-9_-]{8,}\nretry: 2000\ndata: \n\n/
  const newProbe = (): Probe => ({ calls: [], aborted: [] })

  const MODERN = { 'mcp-protocol-version': '2025-11-25' }

  async function callOverSse (url: string, params: unknown, signal?: AbortSignal, headers: Record<string, string> = MODERN): Promise<Response> {
    return await fetch(new URL('/mcp', url), {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'x-chat-id': 'sse', ...headers },
      body: JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/call', params }),
      ...(signal !== undefined && { signal })
    })
  }

  /** Reads a stream until `pattern` matches what arrived so far (or the stream ends). */
  async function readUntil (res: Response, pattern: RegExp): Promise<string> {
    const reader = res.body!.getReader()
    let seen = ''
    while (!pattern.test(seen)) {
      const { value, done } = await reader.read()
      if (done) break
      seen += Buffer.from(value).toString('utf8')
    }
    reader.releaseLock()
    return seen
  }

  const timers = (): number => process.getActiveResourcesInfo().filter(r => r === 'Timeout').length

  t.test('a tools/call stream opens with the priming event, before the tool has finished', async t => {
    const probe = newProbe()
    const { url } = await listen(t, {}, kernelManifest(probe))
    const before = timers()
    const controller = new AbortController()
    const res = await callOverSse(url, { name: 'slow', arguments: { ms: 30000 } }, controller.signal)
    t.equal(res.headers.get('content-type'), 'text/event-stream')
    const head = await readUntil(res, /data: \n\n/)
    t.match(head, PRIMING, 'id, retry and empty data, first on the wire')
    t.same(probe.aborted, [], 'the call is still running')
    controller.abort()
    const started = Date.now()
    while (probe.aborted.length === 0 && Date.now() - started < 5000) await new Promise(resolve => setTimeout(resolve, 10))
    t.same(probe.aborted, ['sse'], 'a dropped stream still cancels the call')
    await new Promise(resolve => setTimeout(resolve, 200))
    t.ok(timers() <= before, 'and frees its keep-alive timer (the SDK answers nothing for a cancelled request)')
  })

  t.test('the whole stream: priming, then progress and the result as message events without ids', async t => {
    const { url } = await listen(t, {}, kernelManifest(newProbe()))
    const res = await callOverSse(url, { name: 'slow', arguments: { ms: 10 }, _meta: { progressToken: 'p' } })
    const text = await res.text()
    t.match(text, PRIMING)
    const events = text.split('\n\n').filter(e => e !== '')
    t.equal(events.length, 3)
    const message = (event: string | undefined): Record<string, unknown> => {
      t.match(event, /^event: message\ndata: \{/)
      return JSON.parse((event ?? '').slice('event: message\ndata: '.length)) as Record<string, unknown>
    }
    t.match(message(events[1]), { method: 'notifications/progress', params: { progressToken: 'p' } })
    t.match(message(events[2]), { id: 5, result: { content: [{ text: 'done' }] } })
    t.equal(text.match(/^id: /gm)?.length, 1, 'only the priming event has an id')
  })

  t.test('GET streams carry the retry field; a GET resuming with Last-Event-ID gets 405 instead of a stream', async t => {
    const { url } = await listen(t, {}, kernelManifest(newProbe()))
    const controller = new AbortController()
    t.teardown(() => { controller.abort() })
    const stream = await fetch(new URL('/mcp', url), { headers: { accept: 'text/event-stream', 'x-chat-id': 'g', ...MODERN }, signal: controller.signal })
    t.match(await readUntil(stream, /stream open/), /^retry: 2000\n: stream open\n\n/)
    const resume = await fetch(new URL('/mcp', url), { headers: { accept: 'text/event-stream', 'x-chat-id': 'g', 'last-event-id': 'abc' } })
    t.equal(resume.status, 405)
    t.equal(resume.headers.get('allow'), 'GET, POST, DELETE')
    t.match(await resume.json(), { error: 'resumption_not_supported', detail: /send it again/ })
  })

  t.test('clients before protocol 2025-11-25 get the old framing: no priming event, no retry field', async t => {
  // TS SDK <= 1.23 and older Python clients parse a field-only event's empty data as JSON and
  // report an error on every call (measured: SyntaxError from SDK 1.12, 1.18, 1.21 and 1.23).
    const { url } = await listen(t, {}, kernelManifest(newProbe()))
    const versions: Array<Record<string, string>> = [{ 'mcp-protocol-version': '2025-06-18' }, { 'mcp-protocol-version': '2024-11-05' }, {}]
    for (const headers of versions) {
      const text = await (await callOverSse(url, { name: 'slow', arguments: { ms: 10 } }, undefined, headers)).text()
      t.match(text, /^event: message\ndata: \{/, `${JSON.stringify(headers)}: the first event is the result`)
      t.notMatch(text, /^(id|retry):/m)
      const controller = new AbortController()
      const stream = await fetch(new URL('/mcp', url), { headers: { accept: 'text/event-stream', ...headers }, signal: controller.signal })
      t.match(await readUntil(stream, /stream open/), /^: stream open\n\n/)
      controller.abort()
    }
  })

  t.test('a client that negotiated 2025-11-25 at initialize is primed by its session id, whatever version header follows', async t => {
  // The conformance suite's server-sse-polling scenario does exactly this.
    const { url } = await listen(t, {}, kernelManifest(newProbe()))
    const init = await fetch(new URL('/mcp', url), {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } } })
    })
    const sid = init.headers.get('mcp-session-id') ?? ''
    await init.text()
    const primed = await callOverSse(url, { name: 'slow', arguments: { ms: 10 } }, undefined, { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-03-26' })
    t.match(await primed.text(), PRIMING)
    const other = await callOverSse(url, { name: 'slow', arguments: { ms: 10 } }, undefined, { 'mcp-session-id': sid.replace(/\.[\d-]+$/, '.2025-06-18'), 'mcp-protocol-version': '2025-03-26' })
    t.notMatch(await other.text(), /^id:/m, 'a session from an older negotiation is not primed')
  })

  t.test('the SDK client parses primed streams without errors and stops at the 405 after a protocol error', async t => {
    const { url } = await listen(t, {}, kernelManifest(newProbe()))
    const gets: Array<{ lastEventId: string | null, status: number }> = []
    const recordingFetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
      const res = await fetch(input, init)
      if ((init?.method ?? 'GET') === 'GET') gets.push({ lastEventId: new Headers(init?.headers).get('last-event-id'), status: res.status })
      return res
    }
    const client = new Client({ name: 'cubicle-test', version: '0.0.0' })
    const errors: Error[] = []
    client.onerror = err => { errors.push(err) }
    t.teardown(async () => { await client.close() })
    await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', url), { fetch: recordingFetch, requestInit: { headers: { 'X-Chat-Id': 'sdk' } } }))
    const progress: number[] = []
    const done = await client.callTool({ name: 'slow', arguments: { ms: 10 } }, undefined, { onprogress: p => { progress.push(p.progress) } })
    t.equal(textOf(done), 'done')
    t.same(progress, [1])
    t.same(errors, [], 'the priming event is not a parse error for the SDK')
    // A JSON-RPC error is not a "result" to the SDK, so it tries to resume the primed stream.
    await t.rejects(client.callTool({ name: 'no-such-tool', arguments: {} }), { code: -32602 })
    const started = Date.now()
    while (!gets.some(g => g.lastEventId !== null) && Date.now() - started < 10000) await new Promise(resolve => setTimeout(resolve, 50))
    t.match(gets.filter(g => g.lastEventId !== null), [{ lastEventId: /^[A-Za-z0-9_-]{8,}$/, status: 405 }], 'one resume attempt, refused')
    await new Promise(resolve => setTimeout(resolve, 2500))
    t.equal(gets.filter(g => g.lastEventId !== null).length, 1, 'the SDK gives up after the 405: no stream left open, no retry loop')
    t.equal(textOf(await client.callTool({ name: 'slow', arguments: { ms: 1 } })), 'done', 'the client keeps working')
  })
})

t.test('mcp-origin', async t => {
// DNS-rebinding defence of /mcp (docs/contract.md#authentication-and-origin). Requests go through node:http so
// that Host and Origin are exactly what a browser under a rebinding attack would send.

  const PING = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' })

  async function ping (url: string, headers: Record<string, string>): Promise<{ status: number, body: string }> {
    const target = new URL('/mcp', url)
    return await new Promise((resolve, reject) => {
      const req = request(target, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers } }, res => {
        let body = ''
        res.on('data', (c: Buffer) => { body += c.toString('utf8') })
        res.on('end', () => { resolve({ status: res.statusCode ?? 0, body }) })
      })
      req.on('error', reject)
      req.end(PING)
    })
  }

  const manifest = kernelManifest({ calls: [], aborted: [] })

  t.test('PUBLIC_BASE_URL unset: the server\'s own loopback origin is accepted (conformance dns-rebinding-protection)', async t => {
    const { url } = await listen(t, { PUBLIC_BASE_URL: '' }, manifest)
    const port = new URL(url).port
    for (const host of ['127.0.0.1', 'localhost', '[::1]']) {
      const res = await ping(url, { host: `${host}:${port}`, origin: `http://${host}:${port}` })
      t.equal(res.status, 200, `Host and Origin ${host}:${port}`)
      t.same(JSON.parse(res.body), { jsonrpc: '2.0', id: 1, result: {} })
    }
    t.equal((await ping(url, { origin: `http://localhost:${port}` })).status, 200, 'Host 127.0.0.1, Origin localhost: a loopback spelling of the same origin')
  })

  t.test('PUBLIC_BASE_URL unset: foreign origins stay refused, even when they match the Host header', async t => {
    const { url } = await listen(t, { PUBLIC_BASE_URL: '' }, manifest)
    const port = Number(new URL(url).port)
    const cases: Array<[Record<string, string>, string]> = [
      [{ host: 'evil.example.com', origin: 'http://evil.example.com' }, 'the rebinding attack: Host and Origin both the attacker\'s'],
      [{ host: `evil.example.com:${port}`, origin: `http://evil.example.com:${port}` }, 'attacker name on our port'],
      [{ origin: `http://127.0.0.1:${port + 1}` }, 'loopback on another port'],
      [{ origin: `https://127.0.0.1:${port}` }, 'https on a plain-HTTP port'],
      [{ host: '127.0.0.2', origin: 'http://127.0.0.2' }, 'Host chosen to equal the Origin'],
      [{ origin: 'null' }, 'opaque origin']
    ]
    for (const [headers, why] of cases) {
      const res = await ping(url, headers)
      t.equal(res.status, 403, why)
      t.match(JSON.parse(res.body), { error: 'forbidden' })
    }
  })

  t.test('PUBLIC_BASE_URL on loopback: its other loopback spellings are the same origin', async t => {
    const { url } = await listen(t, { PUBLIC_BASE_URL: 'http://localhost:18081' }, manifest)
    const port = new URL(url).port
    t.equal((await ping(url, { origin: 'http://127.0.0.1:18081' })).status, 200)
    t.equal((await ping(url, { origin: 'http://[::1]:18081' })).status, 200)
    t.equal((await ping(url, { origin: 'http://localhost:18082' })).status, 403, 'another port')
    t.equal((await ping(url, { origin: `http://127.0.0.1:${port}` })).status, 403, 'the listening port counts only while PUBLIC_BASE_URL is unset')
  })

  t.test('PUBLIC_BASE_URL elsewhere: loopback origins are foreign unless listed', async t => {
    const { url } = await listen(t, { PUBLIC_BASE_URL: 'https://cu.example.com', ALLOWED_ORIGINS: 'http://localhost:6274' }, manifest)
    const port = new URL(url).port
    t.equal((await ping(url, { host: `127.0.0.1:${port}`, origin: `http://127.0.0.1:${port}` })).status, 403)
    t.equal((await ping(url, { origin: 'https://cu.example.com' })).status, 200)
    t.equal((await ping(url, { origin: 'http://localhost:6274' })).status, 200)
    t.equal((await ping(url, {})).status, 200, 'no Origin: server-to-server clients are not affected')
  })

  t.test('an SDK client whose requests carry the server\'s loopback Origin works end to end', async t => {
    const { url } = await listen(t, { PUBLIC_BASE_URL: '' }, manifest)
    const client = await connect(t, url, { Origin: url, 'X-Chat-Id': 'browserish' })
    t.match(textOf(await client.callTool({ name: 'whoami', arguments: {} })), /"chatId":"browserish"/)
  })
})
