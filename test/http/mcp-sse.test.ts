import t from 'tap'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { listen } from '../helper.js'
import { kernelManifest, textOf, type Probe } from '../fixtures/mcp-probe.js'

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
