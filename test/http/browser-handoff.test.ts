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
