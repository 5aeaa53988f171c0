// The app over HTTP: chat id hints, client configurations, the example plugin, request timeouts, the auth failure throttle, one group per part, all in one test process (docs/testing.md#the-unit-tiers-time).
import t, { type Test } from 'tap'
import { buildApp, entry } from '../../core/app.js'
import manifest, { entries, pluginNames } from '../../fastify.config.js'
import { testConfig, TEST_API_KEY, listen, TEST_API_KEY as KEY, awayFromMinuteEdge } from '../helper.js'
import { connect, probePlugin, textOf, type Probe, kernelManifest } from '../fixtures/mcp-probe.js'
import { readFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parse } from 'yaml'
import { readUser } from '../../core/identity.js'
import helloPlugin from '../../examples/hello-plugin/index.js'
import { connect as tcp, type Socket } from 'node:net'
import { mkdtempSync, readdirSync, rmSync, mkdirSync, writeFileSync } from 'node:fs'
import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { chatPaths } from '../../core/chat-paths.js'
import { fakeSandbox, newSandboxLog } from '../fixtures/tiers-app.js'
import { tempDir } from '../fixtures/temp-dir.js'

/*
 * Requests without a chat id (Open WebUI's native MCP connection with its defaults sends none): the
 * note the model sees, the strict-mode error and the server's warning name Open WebUI's switch, and
 * /metrics counts such requests by MCP method and mode. Official SDK client over real HTTP.
 */
t.test('chat-id-hints', async t => {
  const SWITCH = 'ENABLE_FORWARD_USER_INFO_HEADERS=true'
  const AUTH = { Authorization: `Bearer ${TEST_API_KEY}` }

  interface Server { url: string, probe: Probe, logs: Array<Record<string, unknown>> }

  async function server (t: Test, env: Record<string, string>): Promise<Server> {
    const probe: Probe = { calls: [], aborted: [] }
    const logs: Array<Record<string, unknown>> = []
    const config = testConfig({ MCP_API_KEY: TEST_API_KEY, LOG_LEVEL: 'warn', DOCKER_HOST: 'unix:///nonexistent.sock', ...env })
    const app = await buildApp(config, [...entries(config, ['metrics', 'mcp-transport']), entry(probePlugin(probe), {})],
      { logStream: { write: line => { logs.push(JSON.parse(line) as Record<string, unknown>) } } })
    t.teardown(async () => { await app.close() })
    const url = await app.listen({ port: 0, host: '127.0.0.1' })
    return { url, probe, logs }
  }

  /** Samples of cubicle_requests_without_chat_id_total as `method mode` → value. */
  async function chatless (url: string): Promise<Record<string, number>> {
    const text = await (await fetch(`${url}/metrics`, { headers: AUTH })).text()
    const out: Record<string, number> = {}
    for (const line of text.split('\n')) {
      const m = /^cubicle_requests_without_chat_id_total\{method="([^"]+)",mode="([^"]+)"\} (\d+)$/.exec(line)
      if (m !== null) out[`${m[1] ?? ''} ${m[2] ?? ''}`] = Number(m[3])
    }
    return out
  }

  t.test('lenient mode: the note names Open WebUI\'s switch, the warning too, and the calls are counted', async t => {
    const s = await server(t, {})
    const none = await connect(t, s.url, AUTH)
    const result = await none.callTool({ name: 'whoami', arguments: {} })
    const text = textOf(result)
    t.match(text, /"chatId":"default"/, 'it ran in the shared default chat')
    t.match(text, /\n\n---\nNote: this request carried no chat id/)
    t.ok(text.includes(SWITCH), 'the note names ENABLE_FORWARD_USER_INFO_HEADERS=true')
    t.match(text, /X-OpenWebUI-Chat-Id/)
    t.match(text, /other users/, 'the note says the sandbox is shared with other users')
    await none.callTool({ name: 'whoami', arguments: {} })

    const warnings = s.logs.filter(l => typeof l.msg === 'string' && l.msg.includes('shared default sandbox'))
    t.equal(warnings.length, 1, 'one warning per interval')
    t.ok(String(warnings[0]?.msg).includes(SWITCH), 'the warning names the switch')
    t.equal(warnings[0]?.level, 40)

    const counts = await chatless(s.url)
    t.equal(counts['tools/call lenient'], 2, 'both tool calls counted')
    t.equal(counts['initialize lenient'], 1, 'the initialize request too')

    // A chat id in either header, as Open WebUI sends it with the switch on: no note, nothing counted.
    for (const header of ['X-Chat-Id', 'X-OpenWebUI-Chat-Id']) {
      const named = await connect(t, s.url, { ...AUTH, [header]: 'chat-7' })
      const r = textOf(await named.callTool({ name: 'whoami', arguments: {} }))
      t.match(r, /"chatId":"chat-7"/)
      t.notMatch(r, /Note:/)
    }
    const after = await chatless(s.url)
    t.equal(after['tools/call lenient'], 2, 'calls with a chat id are not counted')
    t.notMatch(JSON.stringify(after), /chat-7/)
  })

  t.test('strict mode: the error names the switch, nothing runs, the refusal is counted', async t => {
    const s = await server(t, { SINGLE_USER_MODE: 'false' })
    const none = await connect(t, s.url, AUTH)
    const result = await none.callTool({ name: 'whoami', arguments: {} })
    t.equal(result.isError, true)
    const text = textOf(result)
    t.match(text, /^Error: X-Chat-Id header is required \(SINGLE_USER_MODE=false\)\./)
    t.ok(text.includes(SWITCH), 'the error names ENABLE_FORWARD_USER_INFO_HEADERS=true')
    t.match(text, /X-OpenWebUI-Chat-Id/)
    t.same(s.probe.calls, [], 'nothing ran')
    const counts = await chatless(s.url)
    t.equal(counts['tools/call strict'], 1)
    t.equal(counts['tools/call lenient'], undefined)
  })

  t.test('SINGLE_USER_MODE=true: one shared sandbox on purpose, no note, nothing counted', async t => {
    const s = await server(t, { SINGLE_USER_MODE: 'true' })
    const none = await connect(t, s.url, AUTH)
    t.notMatch(textOf(await none.callTool({ name: 'whoami', arguments: {} })), /Note:/)
    t.same(await chatless(s.url), {})
  })
})

/*
 * the copy-paste client configs of integrations/ are checked against the server itself.
 * LiteLLM (integrations/litellm/config.yaml, docs/contract.md#litellm): parsed as YAML; every forwarded header name,
 * sent lowercased as LiteLLM forwards it, has its effect on a live /mcp; allowed_tools is exactly
 * the server's tools/list. (Claude Desktop's JSON is run through mcp-remote by mcp-remote.test.ts;
 * Claude Code's line is the README's.) No Docker needed: listing tools does not start sandboxes.
 */
t.test('client-configs', async t => {
  const file = (path: string): Promise<string> => readFile(new URL(`../../integrations/${path}`, import.meta.url), 'utf8')

  interface LiteLlmServer { url: string, transport: string, auth_type: string, auth_value: string, extra_headers: string[], allowed_tools: string[] }
  const parsed = parse(await file('litellm/config.yaml')) as { mcp_servers?: Record<string, LiteLlmServer> }
  const entry = parsed.mcp_servers?.computer_use
  if (entry === undefined) throw new Error('integrations/litellm/config.yaml has no mcp_servers.computer_use')
  const litellm: LiteLlmServer = entry

  async function rpc (url: string, headers: Record<string, string>, method: string, params: object = {}): Promise<{ result: { tools?: Array<{ name: string }> } }> {
    const res = await fetch(`${url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params })
    })
    return await res.json() as { result: { tools?: Array<{ name: string }> } }
  }

  t.test('LiteLLM: the server entry has the shape of docs/contract.md#litellm', async t => {
    t.match(litellm.url, /^https?:\/\/[^/]+\/mcp$/, 'the internal URL of /mcp')
    t.equal(litellm.transport, 'http', 'Streamable HTTP')
    t.equal(litellm.auth_type, 'bearer_token')
    t.equal(litellm.auth_value, '<MCP_API_KEY>', 'the key is a placeholder')
    t.same([...litellm.extra_headers].sort(), ['x-chat-id', 'x-mcp-servers', 'x-openwebui-chat-id', 'x-openwebui-user-email',
      'x-openwebui-user-name', 'x-user-email', 'x-user-name'], 'chat, user and sub-agent headers in both forms, no credentials')
  })

  t.test('LiteLLM: every forwarded header, lowercased, reaches the server under that name', async t => {
    const { url } = await listen(t, { MCP_API_KEY: KEY }, kernelManifest({ calls: [], aborted: [] }))
    const auth = { authorization: `Bearer ${KEY}` } // what auth_type bearer_token sends
    const whoami = async (headers: Record<string, string>): Promise<{ chatId: string, email: string | null, name: string | null }> =>
      JSON.parse(textOf((await rpc(url, { ...auth, ...headers }, 'tools/call', { name: 'whoami', arguments: {} })).result as never)) as never
    for (const name of litellm.extra_headers.filter(h => h.endsWith('chat-id'))) {
      t.equal((await whoami({ [name]: `via-${name}` })).chatId, `via-${name}`, name)
    }
    for (const name of litellm.extra_headers.filter(h => h.endsWith('user-email'))) {
      t.equal((await whoami({ 'x-chat-id': 'c1', [name]: 'ana@example.com' })).email, 'ana@example.com', name)
    }
    for (const name of litellm.extra_headers.filter(h => h.endsWith('user-name'))) {
      t.equal((await whoami({ 'x-chat-id': 'c1', [name]: 'Ana%20L%C3%B3pez' })).name, 'Ana López', name)
    }
    // X-Mcp-Servers only changes what sub_agent's CLI is given; it is read by the same function as above.
    t.same(readUser({ 'x-mcp-servers': 'github, jira' }).mcpServers, ['github', 'jira'], 'x-mcp-servers')
  })

  t.test('LiteLLM: allowed_tools is exactly the server\'s tool list', async t => {
    const dataDir = await tempDir(t, 'client-configs')
    const { url } = await listen(t, { MCP_API_KEY: KEY, DATA_DIR: dataDir, DOCKER_HOST: 'unix:///nonexistent/docker.sock' },
      config => entries(config, ['chat-storage', 'mcp-transport', 'capabilities', 'sandbox-docker', 'sandbox', 'workspace-tools', 'runtime-cli', 'sub-agent']))
    const listed = (await rpc(url, { authorization: `Bearer ${KEY}` }, 'tools/list')).result.tools?.map(x => x.name)
    t.same(litellm.allowed_tools, listed, 'same names, same order')
  })

  t.test('Claude Code: the `claude mcp add` line uses HTTP transport, /mcp and both headers as the server names them', async t => {
    const block = /```bash\n([\s\S]*?)```/.exec(await file('claude-code/README.md'))?.[1] ?? ''
    const line = block.replace(/\\\n\s*/g, ' ').trim()
    t.match(line, /^claude mcp add --transport http computer-use https:\/\/[^ ]+\/mcp /)
    const headers = [...line.matchAll(/--header "([^:"]+): ([^"]+)"/g)].map(m => [(m[1] ?? '').toLowerCase(), m[2]])
    t.same(headers, [['authorization', 'Bearer <MCP_API_KEY>'], ['x-chat-id', 'my-project']])
  })
})

t.test('example-plugin', async t => {
  t.test('a plugin added to the manifest contributes a tool after the built-ins and a route, with no core change', async t => {
    const { url } = await listen(t, { DOCKER_HOST: 'unix:///nonexistent.sock' }, config => [...manifest(config), entry(helloPlugin, { greeting: 'Hi' })])
    const client = await connect(t, url, { 'X-Chat-Id': 'plug-in' })
    const names = (await client.listTools()).tools.map(x => x.name)
    t.same(names, ['bash_tool', 'view', 'create_file', 'str_replace', 'sub_agent', 'hello_world'])
    t.equal(textOf(await client.callTool({ name: 'hello_world', arguments: { name: 'Ada', times: '2' } })), 'Hi, Ada! (chat plug-in)\nHi, Ada! (chat plug-in)')
    t.same(await (await fetch(`${url}/hello`)).json(), { greeting: 'Hi' })
  })

  t.test('the default manifest lists exactly the built-in tools in the contract order', async t => {
    const { url } = await listen(t, { DOCKER_HOST: 'unix:///nonexistent.sock' })
    const client = await connect(t, url, { 'X-Chat-Id': 'plain' })
    const tools = (await client.listTools()).tools
    t.same(tools.map(x => x.name), ['bash_tool', 'view', 'create_file', 'str_replace', 'sub_agent'], 'the five tools of docs/contract.md#common-tool-rules')
    t.match(tools.find(x => x.name === 'bash_tool')?.description, /README\.md/)
    t.match(tools.find(x => x.name === 'bash_tool')?.description, /\/home\/assistant/)
    t.match(tools.find(x => x.name === 'view')?.description, /README\.md/)
    for (const tool of tools) t.notOk('outputSchema' in tool, `${tool.name} declares no outputSchema`)
  })

  // removing the sub-agent line of the manifest leaves the other four tools and a prompt that never mentions sub_agent
  t.test('without the sub-agent plugin: four tools, and neither the prompt nor the instructions name sub_agent', async t => {
    const { url, app } = await listen(t, { DOCKER_HOST: 'unix:///nonexistent.sock' }, config => {
      const all = manifest(config)
      const without = entries(config, pluginNames.filter(n => n !== 'sub-agent'))
      t.equal(without.length, all.length - 1, 'exactly one line removed')
      return without
    })
    const client = await connect(t, url, { 'X-Chat-Id': 'no-sub-agent' })
    t.same((await client.listTools()).tools.map(x => x.name), ['bash_tool', 'view', 'create_file', 'str_replace'])
    t.notMatch(client.getInstructions() ?? '', /sub_agent|Sub-agent/)
    const prompt = await app.prompts.render({ chatId: 'no-sub-agent' })
    t.match(prompt, /bash_tool/)
    t.notMatch(prompt, /sub_agent|Sub-agent/)
    const full = await listen(t, { DOCKER_HOST: 'unix:///nonexistent.sock' })
    t.match(await full.app.prompts.render({ chatId: 'with-sub-agent' }), /## Sub-agent/, 'the default manifest has the section')
  })

  t.test('without Docker the server still answers: /ready says docker unavailable and tools fail clearly', async t => {
    const { url } = await listen(t, { DOCKER_HOST: 'unix:///nonexistent.sock' })
    const ready = await fetch(`${url}/ready`)
    t.equal(ready.status, 503)
    t.match(await ready.json(), { status: 'not_ready', docker: 'unavailable' })
    const client = await connect(t, url, { 'X-Chat-Id': 'no-docker' })
    const result = await client.callTool({ name: 'bash_tool', arguments: { command: 'echo hi', description: 'test' } })
    t.equal(result.isError, true)
    t.match(textOf(result), /^Error: .*(Docker|docker)/)
    const page = await fetch(`${url}/`)
    t.match(await page.text(), /bash_tool/)
  })
})

/*
 * REQUEST_TIMEOUT over real sockets, with a 1 s limit: a client that takes longer to
 * *send* its request (slow upload body, slow headers, nothing at all) gets 408 and is closed, while
 * everything that is slow on the response side runs on: an SSE tool call, a silent JSON tool call,
 * the GET /mcp event stream and a WebSocket, each kept open three times as long as the limit.
 */
t.test('request-timeout', async t => {
  const HOLD_MS = 3000

  /** A WebSocket route that answers only after HOLD_MS, as a terminal that is quiet for a while. */
  const lateWebSocket = fp(async (fastify: FastifyInstance) => {
    fastify.get('/ws-probe', { websocket: true }, socket => {
      const timer = setTimeout(() => socket.send('late'), HOLD_MS)
      socket.on('close', () => clearTimeout(timer))
    })
  }, { name: 'ws-probe' })

  async function server (t: Test): Promise<{ url: string, port: number, dataDir: string }> {
    const dataDir = mkdtempSync(join(tmpdir(), 'cubicle-timeout-'))
    t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
    const { url } = await listen(t, { REQUEST_TIMEOUT: '1', DATA_DIR: dataDir, PROGRESS_INTERVAL_SECONDS: '1' }, config => [
      ...entries(config, ['mcp-transport', 'capabilities', 'prompt-render']),
      entry(fakeSandbox(newSandboxLog()), {}),
      ...entries(config, ['chat-storage', 'uploads']),
      entry(probePlugin({ calls: [], aborted: [] }), {}),
      entry(lateWebSocket, {})
    ])
    return { url, port: Number(new URL(url).port), dataDir }
  }

  /** Opens a raw connection, writes `head`, then `drip` one byte every 100 ms; resolves with what came back and when it closed. */
  async function slowClient (port: number, head: string, drip: string): Promise<{ text: string, ms: number }> {
    const start = Date.now()
    return await new Promise((resolve, reject) => {
      const socket: Socket = tcp(port, '127.0.0.1', () => {
        if (head !== '') socket.write(head)
        if (drip === '') return
        let i = 0
        const timer = setInterval(() => {
          if (socket.destroyed || socket.writableEnded) { clearInterval(timer); return }
          socket.write(drip[i++ % drip.length] as string)
        }, 100)
        socket.on('close', () => clearInterval(timer))
      })
      let text = ''
      socket.on('data', chunk => { text += chunk.toString('latin1') })
      socket.on('error', err => { if ((err as NodeJS.ErrnoException).code !== 'ECONNRESET' && (err as NodeJS.ErrnoException).code !== 'EPIPE') reject(err) })
      socket.on('close', () => resolve({ text, ms: Date.now() - start }))
      setTimeout(() => socket.destroy(), 10_000).unref()
    })
  }

  t.test('a request that takes longer than REQUEST_TIMEOUT to arrive gets 408 and is closed', async t => {
    const { port, dataDir } = await server(t)
    const boundary = 'cubicleboundary'
    const upload = await slowClient(port,
    `POST /api/uploads/chat-a/slow.txt HTTP/1.1\r\nHost: localhost\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: 100000\r\n\r\n` +
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="slow.txt"\r\nContent-Type: text/plain\r\n\r\n`, 'x')
    t.match(upload.text, /^HTTP\/1\.1 408 /, 'a slow upload body')
    t.ok(upload.ms < 2900, `closed after ${upload.ms} ms, well before the client would have finished`)
    const uploads = chatPaths(dataDir, 'chat-a').uploads
    const leftovers = (): string[] => { try { return readdirSync(uploads) } catch { return [] } }
    for (let i = 0; i < 40 && leftovers().length > 0; i++) await new Promise(resolve => setTimeout(resolve, 50))
    t.same(leftovers(), [], 'no file or temporary file is left behind')

    const headers = await slowClient(port, 'GET /health HTTP/1.1\r\nHost: localhost\r\n', 'X-Slow: 1\r\n')
    t.match(headers.text, /^HTTP\/1\.1 408 /, 'slowly dripped headers')
    const idle = await slowClient(port, '', '')
    t.ok(idle.ms < 2900, `a connection that sends nothing is closed after ${idle.ms} ms`)
  })

  // response-side work is never cut by the request timeout
  t.test('SSE tool calls, silent JSON tool calls, the GET stream and WebSockets outlive REQUEST_TIMEOUT', async t => {
    const { url, port } = await server(t)
    const client = await connect(t, url, { 'X-Chat-Id': 'chat-a' })

    const sse = client.callTool({ name: 'slow', arguments: { ms: HOLD_MS } })
    const json = fetch(new URL('/mcp', url), {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', 'x-chat-id': 'chat-a' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'slow', arguments: { ms: HOLD_MS } } })
    }).then(async res => ({ status: res.status, body: await res.json() as unknown }))

    const controller = new AbortController()
    const stream = fetch(new URL('/mcp', url), { headers: { accept: 'text/event-stream', 'x-chat-id': 'chat-a' }, signal: controller.signal })
      .then(async res => {
        const reader = (res.body as ReadableStream<Uint8Array>).getReader()
        const opened = Date.now()
        let received = ''
        while (Date.now() - opened < HOLD_MS) {
          const { done, value } = await reader.read()
          if (done) return { status: res.status, openFor: Date.now() - opened, received, ended: true }
          received += new TextDecoder().decode(value)
        }
        controller.abort()
        return { status: res.status, openFor: Date.now() - opened, received, ended: false }
      })

    const ws = webSocketMessage(port, '/ws-probe')

    const [sseResult, jsonResult, streamResult, wsResult] = await Promise.all([sse, json, stream, ws])
    t.equal(textOf(sseResult), 'done', `an SSE tool call of ${HOLD_MS} ms completes`)
    t.equal(jsonResult.status, 200)
    t.match(jsonResult.body, { id: 9, result: { content: [{ text: 'done' }] } }, `a JSON tool call silent for ${HOLD_MS} ms completes`)
    t.equal(streamResult.status, 200)
    t.equal(streamResult.ended, false, `the GET /mcp stream is still open after ${streamResult.openFor} ms`)
    t.match(streamResult.received, /: keep-alive/, 'and carried keep-alive comments')
    t.equal(wsResult, 'late', `a WebSocket quiet for ${HOLD_MS} ms still delivers`)
  })

  /** A minimal WebSocket client over a raw socket: handshake, then the first (unmasked, short) text frame. */
  async function webSocketMessage (port: number, path: string): Promise<string> {
    return await new Promise((resolve, reject) => {
      const socket = tcp(port, '127.0.0.1', () => {
        socket.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n')
      })
      let buffer = Buffer.alloc(0)
      socket.on('data', chunk => {
        buffer = Buffer.concat([buffer, chunk])
        const end = buffer.indexOf('\r\n\r\n')
        if (end === -1) return
        if (!/^HTTP\/1\.1 101 /.test(buffer.toString('latin1'))) { socket.destroy(); reject(new Error(`no upgrade: ${buffer.toString('latin1', 0, 40)}`)); return }
        const frame = buffer.subarray(end + 4)
        if (frame.length < 2 || frame.length < 2 + (frame[1] as number)) return
        socket.destroy()
        resolve(frame.subarray(2, 2 + (frame[1] as number)).toString('utf8'))
      })
      socket.on('error', reject)
      socket.on('close', () => reject(new Error('closed before a message arrived')))
    })
  }
})

/*
 * Failed-auth throttling over a real socket (docs/contract.md#authentication-and-origin): 30+ bad
 * credentials from one address must never lock out the valid key or a valid token, on /mcp (via
 * the official SDK client) and on chat routes; only the failures get 429 with Retry-After. The
 * client address comes from X-Forwarded-For only for trusted proxy hops (TRUST_PROXY).
 */
t.test('auth-throttle', async t => {
  async function server (t: Test, env: Record<string, string> = {}): Promise<{ app: FastifyInstance, url: string }> {
    const dataDir = mkdtempSync(join(tmpdir(), 'cubicle-throttle-'))
    t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
    const outputs = chatPaths(dataDir, 'chat-a').outputs
    mkdirSync(outputs, { recursive: true })
    writeFileSync(join(outputs, 'a.txt'), 'content of chat-a')
    return await listen(t, { MCP_API_KEY: TEST_API_KEY, DATA_DIR: dataDir, ...env }, config => [
      ...entries(config, ['chat-storage', 'mcp-transport', 'capabilities', 'files']),
      entry(probePlugin({ calls: [], aborted: [] }), {})
    ])
  }

  async function mcp (url: string, headers: Record<string, string>): Promise<Response> {
    return await fetch(new URL('/mcp', url), {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'x-chat-id': 'chat-a', ...headers },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' })
    })
  }

  const get = async (url: string, path: string, headers: Record<string, string> = {}): Promise<Response> =>
    await fetch(new URL(path, url), { headers })

  function assertThrottled (t: Test, res: Response, what: string): void {
    t.equal(res.status, 429, `${what} → 429`)
    const retry = Number(res.headers.get('retry-after'))
    t.ok(retry >= 1 && retry <= 60, `${what}: Retry-After ${retry} s`)
  }

  t.test('35 bad credentials from one address: the valid key and tokens still get 200, bad ones 429', async t => {
    const { app, url } = await server(t)
    await awayFromMinuteEdge()
    for (let i = 0; i < 20; i++) t.equal((await mcp(url, { authorization: `Bearer bad-${i}` })).status, 401, `failure ${i + 1} on /mcp`)
    for (let i = 0; i < 10; i++) t.equal((await get(url, `/api/outputs/chat-a?t=bad-${i}`)).status, 403, `failure ${i + 1} on a chat route`)
    assertThrottled(t, await mcp(url, { authorization: 'Bearer bad-again' }), '/mcp with a wrong key')
    assertThrottled(t, await mcp(url, {}), '/mcp without a key')
    assertThrottled(t, await get(url, '/api/outputs/chat-a?t=bad-again'), 'outputs listing with a bad token')
    assertThrottled(t, await get(url, '/files/chat-a/a.txt', { authorization: 'Bearer bad-again' }), 'file with a bad bearer')
    assertThrottled(t, await get(url, `/files/chat-a/a.txt?t=${TEST_API_KEY}`), 'file with the API key in ?t=')

    const client = await connect(t, url, { Authorization: `Bearer ${TEST_API_KEY}`, 'X-Chat-Id': 'chat-a' })
    t.match(textOf(await client.callTool({ name: 'whoami', arguments: {} })), /"chatId":"chat-a"/, '/mcp: the SDK client with the valid key works')
    t.equal((await mcp(url, { authorization: `Bearer ${TEST_API_KEY}` })).status, 200, '/mcp: valid key → 200')
    const listing = await get(url, '/api/outputs/chat-a', { authorization: `Bearer ${TEST_API_KEY}` })
    t.equal(listing.status, 200, 'chat route: valid key → 200')
    t.match(await listing.json(), { files: [{ name: 'a.txt' }] })
    const token = app.links.token('chat-a', 'f') as string
    t.equal((await get(url, `/api/outputs/chat-a?t=${token}`)).status, 200, 'chat route: valid token in ?t= → 200')
    const file = await get(url, `/files/chat-a/~${token}/a.txt`)
    t.equal(file.status, 200, 'chat route: valid ~token path → 200')
    t.equal(await file.text(), 'content of chat-a')
    assertThrottled(t, await mcp(url, { authorization: 'Bearer still-bad' }), 'bad ones stay throttled')
  })

  t.test('TRUST_PROXY=1: the throttled address is the client named by X-Forwarded-For', async t => {
    const { url } = await server(t, { TRUST_PROXY: '1' })
    await awayFromMinuteEdge()
    for (let i = 0; i < 30; i++) await mcp(url, { authorization: 'Bearer bad', 'x-forwarded-for': '203.0.113.7' })
    assertThrottled(t, await mcp(url, { authorization: 'Bearer bad', 'x-forwarded-for': '203.0.113.7' }), 'client 203.0.113.7')
    t.equal((await mcp(url, { authorization: 'Bearer bad', 'x-forwarded-for': '203.0.113.8' })).status, 401, 'another client behind the same proxy is not throttled')
    t.equal((await mcp(url, { authorization: `Bearer ${TEST_API_KEY}`, 'x-forwarded-for': '203.0.113.7' })).status, 200, 'the throttled client with the valid key')
  })

  t.test('TRUST_PROXY unset: a forged X-Forwarded-For does not change the address', async t => {
    const { url } = await server(t)
    await awayFromMinuteEdge()
    for (let i = 0; i < 30; i++) await mcp(url, { authorization: 'Bearer bad', 'x-forwarded-for': `203.0.113.${i}` })
    assertThrottled(t, await mcp(url, { authorization: 'Bearer bad', 'x-forwarded-for': '198.51.100.1' }), 'a fresh forged address')
    assertThrottled(t, await get(url, '/api/outputs/chat-a?t=bad', { 'x-forwarded-for': '198.51.100.2' }), 'on a chat route too')
    t.equal((await mcp(url, { authorization: `Bearer ${TEST_API_KEY}` })).status, 200, 'the valid key still works')
  })
})
