/*
 * `browser handoff "<why>"` (docs/contract.md#browser-handoff) end to end without Docker: the real bash_tool
 * on the in-memory sandbox engine runs what the sandbox's `browser handoff` prints (its request line with
 * the command's token); the official SDK v1 client over real HTTP is the chat app. A client that declared
 * URL elicitation is asked to open the take-over link and the call returns once the Browser view releases
 * (POST /browser/{chat}/handoff/release); a decline returns at once; a client without the capability gets
 * the link as text; a request line with another token is just output.
 */
import t, { type Test } from 'tap'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ElicitRequestSchema, type ElicitResult } from '@modelcontextprotocol/sdk/types.js'
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from '@modelcontextprotocol/client'
import { entry } from '../../core/app.js'
import { entries } from '../../fastify.config.js'
import cdpBridge from '../../plugins/cdp-bridge/index.js'
import sandbox from '../../plugins/sandbox/index.js'
import sandboxMemory from '../../plugins/sandbox-memory/index.js'
import { createMemoryEngine } from '../../plugins/sandbox-memory/memory-engine.js'
import { textOf } from '../fixtures/mcp-probe.js'
import { listen, TEST_API_KEY } from '../helper.js'

const IMAGE = 'cubicle-handoff:memory'
// What sandbox-image/browser/browser prints for `browser handoff "<why>"` (its Chromium start aside).
const HANDOFF = 'echo "::cubicle:: handoff $CUBICLE_REQUEST_TOKEN Log in to example.com"; echo after'
const auth = { Authorization: `Bearer ${TEST_API_KEY}` }

async function app (t: Test): Promise<string> {
  const engine = createMemoryEngine({ images: [IMAGE] })
  const { url } = await listen(t, { MCP_API_KEY: TEST_API_KEY, PUBLIC_BASE_URL: 'http://cubicle.test:8081' }, config => [
    ...entries(config, ['mcp-transport', 'capabilities', 'chat-storage']),
    entry(sandboxMemory, { client: engine }),
    entry(sandbox, { image: IMAGE, prefix: 'cu-handoff', dataDir: config.DATA_DIR, enableNetwork: false, agent: false }),
    ...entries(config, ['workspace-tools']),
    entry(cdpBridge, { publicBaseUrl: config.publicBaseUrl, handoffProgressMs: 50 })
  ])
  return url
}

async function client (t: Test, url: string, chat: string, answer?: (params: { url?: string, message?: string }) => Promise<ElicitResult>): Promise<Client> {
  const c = new Client({ name: 'cubicle-test', version: '0.0.0' }, answer === undefined ? {} : { capabilities: { elicitation: { url: {} } } })
  if (answer !== undefined) c.setRequestHandler(ElicitRequestSchema, async request => await answer(request.params as { url?: string, message?: string }))
  t.teardown(async () => { await c.close() })
  await c.connect(new StreamableHTTPClientTransport(new URL('/mcp', url), { requestInit: { headers: { ...auth, 'X-Chat-Id': chat } } }))
  return c
}

const bash = async (c: Client, command: string): Promise<string> =>
  textOf(await c.callTool({ name: 'bash_tool', arguments: { command, description: 'hand over' } }, undefined, { onprogress: () => {}, resetTimeoutOnProgress: true, timeout: 60_000 }))

const status = async (url: string, chat: string): Promise<{ handoff?: { why: string } }> =>
  await (await fetch(`${url}/browser/${chat}/status`, { headers: auth })).json() as { handoff?: { why: string } }
const release = async (url: string, chat: string): Promise<{ released: boolean }> =>
  await (await fetch(`${url}/browser/${chat}/handoff/release`, { method: 'POST', headers: auth })).json() as { released: boolean }

t.test('a client with URL elicitation asks the human, and the call returns when the browser is handed back', async t => {
  const url = await app(t)
  const asked: Array<{ url?: string, message?: string }> = []
  const c = await client(t, url, 'hand-a', async params => { asked.push(params); return { action: 'accept' } })
  const call = bash(c, HANDOFF)
  let open: { handoff?: { why: string } } = {}
  for (let i = 0; i < 100 && open.handoff === undefined; i++) {
    await new Promise(resolve => setTimeout(resolve, 50))
    open = await status(url, 'hand-a')
  }
  t.same(open.handoff?.why, 'Log in to example.com', 'the Browser view shows the reason while the call waits')
  t.equal(asked.length, 1, 'the human was asked once')
  t.match(asked[0]?.url, /^http:\/\/cubicle\.test:8081\/preview\/hand-a\?t=[^#]+#browser$/, 'the take-over link: this chat\'s preview, Browser view, control token')
  t.match(asked[0]?.message, /take over the browser: Log in to example\.com/)
  t.same(await release(url, 'hand-a'), { released: true }, 'the view hands back')
  const text = await call
  t.match(text, /handed it back after \d+ s/, 'the model learns the human released the browser')
  t.notMatch(text, /::cubicle::|CUBICLE_REQUEST_TOKEN/, 'the request line is not shown to the model')
  t.match(text, /after/, 'the rest of the output stays')
  t.same(await status(url, 'hand-a'), { active: false, pages: [] }, 'nothing open any more')
  t.same(await release(url, 'hand-a'), { released: false })
})

t.test('a declined handoff returns at once; without the capability the link is given as text', async t => {
  const url = await app(t)
  const declining = await client(t, url, 'hand-b', async () => ({ action: 'decline' }))
  t.match(await bash(declining, HANDOFF), /The user declined the request to take over the browser \(Log in to example\.com\)/)
  t.same((await status(url, 'hand-b')).handoff, undefined)

  const plain = await client(t, url, 'hand-c')
  const text = await bash(plain, HANDOFF)
  t.match(text, /Give them this link \(it opens the live browser of this chat\): http:\/\/cubicle\.test:8081\/preview\/hand-c\?t=\S+#browser/)
  t.same((await status(url, 'hand-c')).handoff?.why, 'Log in to example.com', 'the view shows the reason until the human hands back')
  t.same(await release(url, 'hand-c'), { released: true })
})

t.test('a request line with another token is output, not a request', async t => {
  const url = await app(t)
  const asked: unknown[] = []
  const c = await client(t, url, 'hand-d', async params => { asked.push(params); return { action: 'accept' } })
  const forged = '::cubicle:: handoff 0123456789abcdef0123456789abcdef Log in'
  const text = await bash(c, `echo "${forged}"`)
  t.match(text, forged, 'printed as it is')
  t.same(asked, [], 'nobody was asked')
  t.same((await status(url, 'hand-d')).handoff, undefined)
})

/** An official SDK v2 client on 2026-07-28; with `answer`, it declares URL elicitation and answers input_required rounds with it. */
async function modernClient (t: Test, url: string, chat: string, answer?: (params: { url?: string, message?: string }) => Promise<{ action: 'accept' | 'decline' | 'cancel' }>): Promise<ModernClient> {
  const c = new ModernClient({ name: 'cubicle-test-v2', version: '0.0.0' }, {
    versionNegotiation: { mode: { pin: '2026-07-28' } },
    ...(answer !== undefined && { capabilities: { elicitation: { url: {} } } })
  })
  if (answer !== undefined) c.setRequestHandler('elicitation/create', async request => await answer(request.params as { url?: string, message?: string }))
  t.teardown(async () => { await c.close() })
  await c.connect(new ModernTransport(new URL('/mcp', url), { requestInit: { headers: { ...auth, 'X-Chat-Id': chat } } }))
  return c
}

const modernBash = async (c: ModernClient, command: string): Promise<string> =>
  textOf(await c.callTool({ name: 'bash_tool', arguments: { command, description: 'hand over' } }, { onprogress: () => {}, resetTimeoutOnProgress: true, timeout: 60_000 }))

t.test('2026-07-28: the call answers input_required with the URL, the client retries with the human\'s answer, the command runs once', async t => {
  const url = await app(t)
  const asked: Array<{ url?: string, message?: string }> = []
  const c = await modernClient(t, url, 'hand-m', async params => { asked.push(params); return { action: 'accept' } })
  // The command counts its runs in the sandbox: the retried call must not run it again.
  const call = modernBash(c, `echo run >> /tmp/handoff-runs; ${HANDOFF}`)
  let open: { handoff?: { why: string } } = {}
  for (let i = 0; i < 100 && open.handoff === undefined; i++) {
    await new Promise(resolve => setTimeout(resolve, 50))
    open = await status(url, 'hand-m')
  }
  t.same(open.handoff?.why, 'Log in to example.com', 'the Browser view shows the reason while the retried call waits')
  for (let i = 0; i < 100 && asked.length === 0; i++) await new Promise(resolve => setTimeout(resolve, 20))
  t.equal(asked.length, 1, 'the human was asked once, through the input_required round')
  t.match(asked[0]?.url, /^http:\/\/cubicle\.test:8081\/preview\/hand-m\?t=[^#]+#browser$/)
  t.match(asked[0]?.message, /take over the browser: Log in to example\.com/)
  await new Promise(resolve => setTimeout(resolve, 200))
  t.same(await release(url, 'hand-m'), { released: true }, 'the view hands back')
  const text = await call
  t.match(text, /handed it back after \d+ s/, 'the model learns the human released the browser')
  t.match(text, /after/, 'with the command\'s output')
  t.notMatch(text, /::cubicle::/)
  t.match(await modernBash(c, 'cat /tmp/handoff-runs'), /^run\s*$/, 'the command ran once')

  const declining = await modernClient(t, url, 'hand-n', async () => ({ action: 'decline' }))
  t.match(await modernBash(declining, HANDOFF), /The user declined the request to take over the browser \(Log in to example\.com\)/)
  const plain = await modernClient(t, url, 'hand-o')
  t.match(await modernBash(plain, HANDOFF), /Give them this link/, 'without elicitation.url the link is text, as before')
})

t.test('2026-07-28: a requestState the server did not seal for this chat and tool is refused', async t => {
  const url = await app(t)
  const post = async (chat: string, params: Record<string, unknown>): Promise<{ error?: { code: number, message: string }, result?: { resultType?: string, requestState?: string } }> => {
    const res = await fetch(new URL('/mcp', url), {
      method: 'POST',
      headers: { ...auth, 'x-chat-id': chat, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'bash_tool' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'bash_tool', arguments: { command: HANDOFF, description: 'x' }, ...params, _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': { elicitation: { url: {} } }, 'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '0' } } } })
    })
    const body = await res.text()
    const data = body.startsWith('{') ? body : body.split('\n').filter(l => l.startsWith('data: ')).map(l => l.slice(6)).find(l => l.includes('"id":1')) ?? '{}'
    return JSON.parse(data)
  }
  const first = await post('hand-s', {})
  t.equal(first.result?.resultType, 'input_required')
  const state = first.result?.requestState ?? ''
  t.match(state, /^v1\./, 'sealed')
  const elsewhere = await post('hand-t', { requestState: state, inputResponses: { handoff: { action: 'decline' } } })
  t.match(elsewhere.error, { code: -32602, message: /Invalid or expired requestState/ }, 'not in another chat')
  const forged = await post('hand-s', { requestState: `${state.slice(0, -4)}AAAA`, inputResponses: { handoff: { action: 'decline' } } })
  t.match(forged.error, { code: -32602 }, 'not altered')
  const back = await post('hand-s', { requestState: state, inputResponses: { handoff: { action: 'decline' } } })
  t.match(JSON.stringify(back.result), /The user declined/, 'the sealed state resumes the call')
})
