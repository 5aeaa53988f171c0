import t from 'tap'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { listen } from '../helper.js'
import { kernelManifest, textOf } from '../fixtures/mcp-probe.js'

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
