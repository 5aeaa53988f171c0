import t, { type Test } from 'tap'
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import { listen } from '../helper.js'
import { kernelManifest, textOf, type Probe } from '../fixtures/mcp-probe.js'

// MCP 2026-07-28 on /mcp (docs/contract.md#protocol-revisions): the SDK v2 client pinned to that
// revision over real HTTP, and raw requests where the wire itself is the point.

const REVISION = '2026-07-28'
const newProbe = (): Probe => ({ calls: [], aborted: [] })

async function modernClient (t: Test, url: string, headers: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: 'cubicle-test-v2', version: '0.0.0' }, { versionNegotiation: { mode: { pin: REVISION } } })
  t.teardown(async () => { await client.close() })
  await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', url), { requestInit: { headers } }))
  return client
}

/** A raw 2026-07-28 request: the `_meta` envelope and the standard headers a client sends. */
async function post (url: string, method: string, params: Record<string, unknown> = {}, headers: Record<string, string> = {}): Promise<Response> {
  const body = {
    jsonrpc: '2.0',
    id: 7,
    method,
    params: {
      ...params,
      _meta: { 'io.modelcontextprotocol/protocolVersion': REVISION, 'io.modelcontextprotocol/clientCapabilities': {} }
    }
  }
  return await fetch(new URL('/mcp', url), {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': REVISION, 'mcp-method': method, ...headers },
    body: JSON.stringify(body)
  })
}

t.test('server/discover: the revision, capabilities and the chat\'s own instructions', async t => {
  const { url } = await listen(t, {}, kernelManifest(newProbe()))
  const client = await modernClient(t, url, { 'X-Chat-Id': 'Chat-A' })
  const discover = client.getDiscoverResult()
  t.ok(discover?.supportedVersions.includes(REVISION), 'the modern revision is offered')
  t.same(discover?.capabilities.tools, { listChanged: false })
  t.same(discover?.capabilities.resources, { subscribe: false, listChanged: true })
  t.equal(discover?.instructions, 'instructions for chat-a', 'tier 4: rendered for the chat of the request')

  const raw = await post(url, 'server/discover', {}, { 'x-chat-id': 'chat-b' })
  t.equal(raw.status, 200)
  t.equal(raw.headers.get('mcp-session-id'), null, 'no session on this revision')
  const { result } = await raw.json() as { result: { instructions: string, ttlMs: number, cacheScope: string } }
  t.equal(result.instructions, 'instructions for chat-b')
  t.equal(result.cacheScope, 'private', 'instructions differ per chat: never shared')
})

t.test('tools: deterministic order, chat binding per request, errors shaped as on 2025-11-25', async t => {
  const probe = newProbe()
  const { url } = await listen(t, {}, kernelManifest(probe))
  const a = await modernClient(t, url, { 'X-Chat-Id': 'c1' })
  const first = (await a.listTools()).tools.map(tool => tool.name)
  t.same(first, ['whoami', 'slow', 'boom'], 'by order, then registration')
  t.same((await a.listTools()).tools.map(tool => tool.name), first, 'the same order every time')
  t.match(textOf(await a.callTool({ name: 'whoami', arguments: { n: '3' } })), '"chatId":"c1"')
  const b = await modernClient(t, url, { 'X-Chat-Id': 'c2', 'X-User-Email': 'bob@example.com' })
  t.match(textOf(await b.callTool({ name: 'whoami', arguments: {} })), '"email":"bob@example.com"')
  t.same(probe.calls.map(c => c.chatId), ['c1', 'c2'], 'each request names its chat; no session carries one')
  const boom = await a.callTool({ name: 'boom', arguments: {} })
  t.equal(boom.isError, true)
  t.match(textOf(boom), /^Error: internal error \(ref /)
  t.notMatch(textOf(boom), /secret|\/srv/, 'the stack stays in the log')

  const listed = await post(url, 'tools/list')
  const { result } = await listed.json() as { result: { ttlMs: number, cacheScope: string } }
  t.equal(result.cacheScope, 'public', 'the tool list is the same for every chat')
  t.ok(result.ttlMs > 0)
  const unknown = await post(url, 'tools/call', { name: 'nope', arguments: {} }, { 'mcp-name': 'nope', accept: 'application/json' })
  t.match(await unknown.json(), { error: { code: -32602, message: 'Unknown tool: nope' } })
})

t.test('a long tools/call streams progress and keep-alives; aborting the request cancels the tool', async t => {
  const probe = newProbe()
  const { url } = await listen(t, { PROGRESS_INTERVAL_SECONDS: '1' }, kernelManifest(probe))
  const client = await modernClient(t, url, { 'X-Chat-Id': 'c1' })
  const progress: string[] = []
  const done = await client.callTool({ name: 'slow', arguments: { ms: 1500 } }, { onprogress: p => { progress.push(p.message ?? '') } })
  t.equal(textOf(done), 'done')
  t.same(progress, ['started'])

  const raw = await post(url, 'tools/call', { name: 'slow', arguments: { ms: 2500 } }, { 'x-chat-id': 'c3', 'mcp-name': 'slow' })
  t.equal(raw.headers.get('content-type'), 'text/event-stream', 'a call that accepts SSE is streamed from the start')
  t.match(await raw.text(), /: keepalive[\s\S]*"text":"done"/, 'keep-alive comments while the tool runs, then the result')

  const controller = new AbortController()
  const cancelled = client.callTool({ name: 'slow', arguments: { ms: 60000 } }, { signal: controller.signal })
  while (probe.calls.length < 3) await new Promise(resolve => setTimeout(resolve, 20))
  controller.abort()
  await t.rejects(cancelled)
  while (probe.aborted.length === 0) await new Promise(resolve => setTimeout(resolve, 20))
  t.same(probe.aborted, ['c1'], 'the tool saw its signal abort')
})

t.test('resources are per chat, never shared-cached; a miss is -32602 with the uri', async t => {
  const { url } = await listen(t, {}, kernelManifest(newProbe()))
  const client = await modernClient(t, url, { 'X-Chat-Id': 'c1' })
  t.same((await client.listResources()).resources.map(r => r.uri), ['file://uploads/c1/a.txt'])
  t.match(await client.readResource({ uri: 'file://uploads/c1/a.txt' }), { contents: [{ text: 'A' }] })
  await t.rejects(client.readResource({ uri: 'file://uploads/c2/a.txt' }), { code: -32602 })
  const listed = await post(url, 'resources/list', {}, { 'x-chat-id': 'c1' })
  t.match(await listed.json(), { result: { cacheScope: 'private', ttlMs: 0 } })
  const missing = await post(url, 'resources/read', { uri: 'file://uploads/c1/none' }, { 'x-chat-id': 'c1', 'mcp-name': 'file://uploads/c1/none' })
  t.match(await missing.json(), { error: { code: -32602, data: { uri: 'file://uploads/c1/none' } } })
  t.match(await (await post(url, 'prompts/list')).json(), { result: { prompts: [] } })
})

t.test('header validation: Mcp-Method must match the body, a modern header needs the envelope', async t => {
  const { url } = await listen(t, {}, kernelManifest(newProbe()))
  const mismatch = await post(url, 'tools/list', {}, { 'mcp-method': 'prompts/list' })
  t.equal(mismatch.status, 400)
  t.match(await mismatch.json(), { error: { code: -32020 } })
  const bare = await fetch(new URL('/mcp', url), {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', 'mcp-protocol-version': REVISION },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' })
  })
  t.equal(bare.status, 400)
  t.match(await bare.json(), { error: { code: -32602 } })
  const initialize = await post(url, 'initialize', { protocolVersion: REVISION, capabilities: {}, clientInfo: { name: 'x', version: '1' } })
  t.match(await initialize.json(), { error: { code: -32601 } }, 'initialize does not exist on this revision')
})

/** Opens a subscriptions/listen stream for the chat; aborted when the test ends or by the returned controller. */
async function openListen (t: Test, url: string, chat: string, id = 'sub-1'): Promise<{ res: Response, controller: AbortController }> {
  const controller = new AbortController()
  t.teardown(() => { controller.abort() })
  const res = await fetch(new URL('/mcp', url), {
    method: 'POST',
    signal: controller.signal,
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': REVISION, 'mcp-method': 'subscriptions/listen', 'x-chat-id': chat },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id,
      method: 'subscriptions/listen',
      params: { notifications: { resourcesListChanged: true }, _meta: { 'io.modelcontextprotocol/protocolVersion': REVISION, 'io.modelcontextprotocol/clientCapabilities': {} } }
    })
  })
  return { res, controller }
}

t.test('subscriptions/listen carries only its own chat\'s notifications', async t => {
  const { app, url } = await listen(t, {}, kernelManifest(newProbe()))
  const { res } = await openListen(t, url, 'listener')
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
  await readUntil(/subscriptions\/acknowledged/)
  t.equal(app.mcp.notifyChat('someone-else', { method: 'notifications/resources/list_changed' }), 0, 'another chat has no listener')
  t.equal(app.mcp.notifyChat('listener', { method: 'notifications/resources/list_changed' }), 1)
  await readUntil(/resources\/list_changed/)
  t.match(seen, /"method":"notifications\/resources\/list_changed","params":\{"_meta":\{"io\.modelcontextprotocol\/subscriptionId":"sub-1"\}/)
})

t.test('one chat cannot hold more than 16 listen streams; other chats still get theirs', async t => {
  const { url } = await listen(t, {}, kernelManifest(newProbe()))
  const open = []
  for (let i = 0; i < 16; i++) open.push(await openListen(t, url, 'flood', `s${i}`))
  t.ok(open.every(o => o.res.headers.get('content-type') === 'text/event-stream'), '16 streams open')
  const refused = await openListen(t, url, 'flood', 's16')
  t.match(await refused.res.json(), { id: 's16', error: { code: -32603 } }, 'the 17th is refused')
  const other = await openListen(t, url, 'quiet')
  t.equal(other.res.headers.get('content-type'), 'text/event-stream', 'another chat is not affected')
  open[0]?.controller.abort()
  let again = await openListen(t, url, 'flood', 'again')
  for (let i = 0; i < 50 && again.res.headers.get('content-type') !== 'text/event-stream'; i++) {
    await new Promise(resolve => setTimeout(resolve, 20))
    again = await openListen(t, url, 'flood', `again-${i}`)
  }
  t.equal(again.res.headers.get('content-type'), 'text/event-stream', 'a closed stream frees its place')
})

t.test('shutdown: a running 2026-07-28 call is drained, then answered with the restart error; listen streams end', async t => {
  const probe = newProbe()
  // CLOSE_GRACE_MS 5000: calls get 1000 ms to finish, then up to 3000 ms to stop.
  const { app, url } = await listen(t, { CLOSE_GRACE_MS: '5000' }, kernelManifest(probe))
  const client = await modernClient(t, url, { 'X-Chat-Id': 'drain-modern' })
  const { res } = await openListen(t, url, 'drain-modern')
  const streamEnded = res.text()
  const call = client.callTool({ name: 'slow', arguments: { ms: 120000 } })
  while (probe.calls.length === 0) await new Promise(resolve => setTimeout(resolve, 20))
  const t0 = Date.now()
  await app.close()
  const closeMs = Date.now() - t0
  const result = await call
  t.equal(result.isError, true)
  t.match(textOf(result), /server is shutting down .* sandbox keeps running/)
  t.same(probe.aborted, ['drain-modern'], 'the tool saw its abort signal after the drain')
  t.ok(closeMs >= 900 && closeMs < 4500, `close took ${closeMs} ms: the 1000 ms drain, then the stop`)
  t.match(await streamEnded, /subscriptions\/acknowledged[\s\S]*"resultType":"complete"/, 'the listen stream was ended with its final result')
})

t.test('notifications/cancelled stops the matching call of that chat', async t => {
  const probe = newProbe()
  const { url } = await listen(t, {}, kernelManifest(probe))
  const call = post(url, 'tools/call', { name: 'slow', arguments: { ms: 60000 } }, { 'x-chat-id': 'c9', 'mcp-name': 'slow' })
  while (probe.calls.length === 0) await new Promise(resolve => setTimeout(resolve, 20))
  const meta = { 'io.modelcontextprotocol/protocolVersion': REVISION, 'io.modelcontextprotocol/clientCapabilities': {} }
  const cancel = await fetch(new URL('/mcp', url), {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': REVISION, 'mcp-method': 'notifications/cancelled', 'x-chat-id': 'c9' },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 7, reason: 'user', _meta: meta } })
  })
  t.equal(cancel.status, 202)
  while (probe.aborted.length === 0) await new Promise(resolve => setTimeout(resolve, 20))
  t.same(probe.aborted, ['c9'], 'the tool saw its abort signal')
  const res = await call
  t.notMatch(await res.text().catch(() => ''), /"result"/, 'a cancelled call sends no result')
})
