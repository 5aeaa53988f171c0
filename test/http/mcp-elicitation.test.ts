/*
 * URL-mode elicitation from a tool call (docs/contract.md#url-elicitation), with the official SDK v1 client
 * over real HTTP: a client that declared `elicitation.url` at initialize is asked on the call's SSE stream
 * and its answer (a separate POST) reaches the tool; a client that did not declare it, or a call answered
 * as JSON, gives the tool no way to ask; another chat cannot answer for it; a silent client times out.
 */
import t, { type Test } from 'tap'
import fp from 'fastify-plugin'
import Type from 'typebox'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ElicitRequestSchema, type ElicitResult } from '@modelcontextprotocol/sdk/types.js'
import { entry } from '../../core/app.js'
import { entries } from '../../fastify.config.js'
import type {} from '../../plugins/mcp-transport/types.js'
import { textOf } from '../fixtures/mcp-probe.js'
import { listen } from '../helper.js'

/** A tool that asks the human to open a URL when it can, and reports what happened. */
const askPlugin = fp(async fastify => {
  fastify.mcp.addTool({
    name: 'ask_url',
    description: 'Asks the human to open a URL.',
    inputSchema: Type.Object({ timeoutMs: Type.Optional(Type.Integer()) }),
    handler: async (args, ctx) => {
      if (ctx.elicitUrl === undefined) return { content: [{ type: 'text', text: 'unsupported' }] }
      try {
        const action = await ctx.elicitUrl({ message: 'Log in, then hand back.', url: 'http://127.0.0.1:1/preview/c?view=browser', elicitationId: 'h-1' }, args.timeoutMs ?? 10_000)
        return { content: [{ type: 'text', text: action }] }
      } catch (err) {
        return { content: [{ type: 'text', text: `failed: ${(err as Error).message}` }] }
      }
    }
  })
}, { name: 'ask-url', dependencies: ['mcp-transport'] })

async function client (t: Test, url: string, chat: string, answer?: (params: unknown) => Promise<ElicitResult>): Promise<Client> {
  const c = new Client({ name: 'cubicle-test', version: '0.0.0' }, answer === undefined ? {} : { capabilities: { elicitation: { url: {} } } })
  if (answer !== undefined) c.setRequestHandler(ElicitRequestSchema, async request => await answer(request.params))
  t.teardown(async () => { await c.close() })
  await c.connect(new StreamableHTTPClientTransport(new URL('/mcp', url), { requestInit: { headers: { 'X-Chat-Id': chat } } }))
  return c
}

const call = async (c: Client, args: Record<string, unknown> = {}): Promise<string> =>
  textOf(await c.callTool({ name: 'ask_url', arguments: args }, undefined, { onprogress: () => {}, timeout: 30_000 }))

t.test('a tool asks a client that declared elicitation.url to have the human open a URL', async t => {
  const { url } = await listen(t, {}, config => [...entries(config, ['mcp-transport']), entry(askPlugin, {})])

  const seen: unknown[] = []
  const accepting = await client(t, url, 'chat-a', async params => { seen.push(params); return { action: 'accept' } })
  t.equal(await call(accepting), 'accept', 'the human\'s action reaches the tool')
  t.same(seen, [{ mode: 'url', message: 'Log in, then hand back.', url: 'http://127.0.0.1:1/preview/c?view=browser', elicitationId: 'h-1' }], 'URL mode, nothing else asked')

  const declining = await client(t, url, 'chat-b', async () => ({ action: 'decline' }))
  t.equal(await call(declining), 'decline')

  const plain = await client(t, url, 'chat-c')
  t.equal(await call(plain), 'unsupported', 'no capability declared: the tool cannot ask')

  const silent = await client(t, url, 'chat-d', async () => await new Promise<ElicitResult>(() => {}))
  t.match(await call(silent, { timeoutMs: 300 }), /^failed: the client did not answer elicitation\/create within/, 'a client that never answers times out')
})

t.test('only the asked chat can answer, and a JSON reply cannot carry the request', async t => {
  const { url } = await listen(t, {}, config => [...entries(config, ['mcp-transport']), entry(askPlugin, {})])
  // A raw client: initialize declaring URL elicitation, then a streamed call; the answer comes from elsewhere.
  const post = async (body: unknown, headers: Record<string, string>): Promise<Response> => await fetch(new URL('/mcp', url), {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25', ...headers },
    body: JSON.stringify(body)
  })
  const init = await post({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: { elicitation: { url: {} } }, clientInfo: { name: 'raw', version: '0' } } }, { 'x-chat-id': 'owner' })
  const session = init.headers.get('mcp-session-id') ?? ''
  t.match(session, /\.url\.2025-11-25$/, 'the session id remembers the capability')

  const asJson = await fetch(new URL('/mcp', url), {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', 'x-chat-id': 'owner', 'mcp-session-id': session },
    body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'ask_url', arguments: {} } })
  })
  t.equal(textOf(((await asJson.json()) as { result: unknown }).result), 'unsupported', 'a call answered as JSON cannot ask')

  const streamed = await post({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'ask_url', arguments: { timeoutMs: 5000 } } }, { 'x-chat-id': 'owner', 'mcp-session-id': session })
  const reader = streamed.body!.getReader()
  let text = ''
  let request: { id: string } | undefined
  while (request === undefined) {
    const { value, done } = await reader.read()
    if (done) break
    text += Buffer.from(value).toString('utf8')
    const match = /data: (\{"jsonrpc":"2\.0","id":"cubicle-[^\n]*"method":"elicitation\/create"[^\n]*)\n/.exec(text)
    if (match?.[1] !== undefined) request = JSON.parse(match[1]) as { id: string }
  }
  t.ok(request !== undefined, 'the request went out on the call\'s stream')
  const answer = { jsonrpc: '2.0', id: request?.id, result: { action: 'accept' } }
  t.equal((await post(answer, { 'x-chat-id': 'intruder' })).status, 202, 'another chat\'s answer is taken (202) but settles nothing')
  t.equal((await post({ ...answer, result: { action: 'decline' } }, { 'x-chat-id': 'owner' })).status, 202)
  while (!/"result":\{"content"/.test(text)) {
    const { value, done } = await reader.read()
    if (done) break
    text += Buffer.from(value).toString('utf8')
  }
  t.match(text, /"text":"decline"/, 'the owner\'s answer reached the tool')
})
