// The browser Origin rule of the terminal and browser WebSockets and of the chat routes, on the real
// stack and a real sandbox (docs/architecture.md#security-model): both sockets give the same answer for every
// Origin, in open and protected mode; `null` (a sandboxed iframe) only with a capability token, so
// never in open mode; chat routes never answer `Access-Control-Allow-Origin: *`.
import t from 'tap'
import type { Test } from 'tap'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import WebSocket from 'ws'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { dockerOrSkip } from './docker.js'
import { chromiumOrSkip, embeddedFrame, gotoReady, launchChromium, logRequestTrouble, orPageLog } from './chromium.js'
import { connect } from '../fixtures/mcp-probe.js'
import { TermClient, terminalStack, type TerminalStack } from '../plugins/terminal/integration-app.js'

const gate = await dockerOrSkip()
const chromium = chromiumOrSkip()
// Open mode puts every chat without an id in `default`: the sandbox a hostile page would aim at.
const CHAT = 'default'
const ALLOWED = 'https://chat.example'

/** The HTTP status of a WebSocket handshake: 101 when it was accepted (the socket is closed again). */
async function handshake (url: string, origin: string | undefined, protocols: string[] = []): Promise<number> {
  return await new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols, origin === undefined ? {} : { origin })
    ws.once('open', () => { ws.terminate(); resolve(101) })
    ws.once('unexpected-response', (_req, res) => { res.resume(); ws.terminate(); resolve(res.statusCode ?? 0) })
    ws.once('error', reject)
  })
}

/** Both sockets of a chat, with the query (`?t=…` or nothing) a caller presents. */
function sockets (url: string, query: string): Record<'terminal' | 'browser', (origin: string | undefined) => Promise<number>> {
  const ws = url.replace(/^http/, 'ws')
  return {
    terminal: async origin => await handshake(`${ws}/terminal/${CHAT}/ws${query}`, origin, ['tty']),
    browser: async origin => await handshake(`${ws}/browser/${CHAT}/devtools/page/no-such-page${query}`, origin)
  }
}

type Row = [origin: string | undefined, status: number, why: string]

/** Runs the table against both sockets: each row's status, from the terminal and the browser socket alike. */
async function table (t: Test, stack: TerminalStack, query: string, rows: Row[]): Promise<void> {
  const both = sockets(stack.url, query)
  for (const [origin, status, why] of rows) {
    const got = { terminal: await both.terminal(origin), browser: await both.browser(origin) }
    t.same(got, { terminal: status, browser: status }, `Origin ${origin ?? '(none)'}: ${status} from both sockets (${why})`)
  }
}

const portOf = (url: string): number => Number(new URL(url).port)

t.test('open mode, PUBLIC_BASE_URL unset: only the server\'s own loopback origin and non-browser clients', gate, async t => {
  const stack = await terminalStack(t, { MCP_API_KEY: '', PUBLIC_BASE_URL: '', ALLOWED_ORIGINS: ALLOWED })
  await stack.app.sandbox.ensure(CHAT)
  const port = portOf(stack.url)
  await table(t, stack, '', [
    ['null', 403, 'a sandboxed iframe of any site: no token exists in open mode'],
    ['https://evil.example', 403, 'a foreign site'],
    [`http://localhost:${port + 1}`, 403, 'another local port is another application'],
    [`http://127.0.0.1:${port}`, 101, 'the server\'s own page (it listens on loopback)'],
    [`http://localhost:${port}`, 101, 'its localhost spelling'],
    [`http://[::1]:${port}`, 101, 'its IPv6 loopback spelling'],
    [ALLOWED, 101, 'ALLOWED_ORIGINS'],
    [undefined, 101, 'a non-browser client (browsers always send Origin on a WebSocket handshake)']
  ])
  // The non-browser client really gets the shell (the command-line path keeps working).
  const term = await TermClient.open(t, stack.url, CHAT, '')
  await term.waitFor(/\$ /)
  term.type('echo cli-$((6*7))\r')
  await term.waitFor(/cli-42/)
  t.pass('a client without Origin (the command line) types into the shell')
  await term.close()
})

t.test('open mode, PUBLIC_BASE_URL set: its origin and loopback spellings, ALLOWED_ORIGINS; never null', gate, async t => {
  const stack = await terminalStack(t, { MCP_API_KEY: '', ALLOWED_ORIGINS: ALLOWED })
  await stack.app.sandbox.ensure(CHAT)
  const port = portOf(stack.url)
  await table(t, stack, '', [
    ['null', 403, 'opaque origin without a token'],
    ['https://evil.example', 403, 'a foreign site'],
    [`http://127.0.0.1:${port}`, 101, 'PUBLIC_BASE_URL'],
    [`http://localhost:${port}`, 101, 'a loopback spelling of PUBLIC_BASE_URL'],
    [`https://127.0.0.1:${port}`, 403, 'another scheme is another origin'],
    [ALLOWED, 101, 'ALLOWED_ORIGINS'],
    [undefined, 101, 'a non-browser client']
  ])
})

t.test('protected mode: null only with a control token of the chat', gate, async t => {
  const stack = await terminalStack(t, { ALLOWED_ORIGINS: ALLOWED })
  await stack.app.sandbox.ensure(CHAT)
  const port = portOf(stack.url)
  const control = `?t=${stack.token(CHAT)}`
  await table(t, stack, control, [
    ['null', 101, 'our page in an opaque-origin iframe, presenting its token'],
    ['https://evil.example', 403, 'a foreign site, even with a valid token'],
    [`http://localhost:${port}`, 101, 'a loopback spelling of PUBLIC_BASE_URL'],
    [`http://localhost:${port + 1}`, 403, 'another local port'],
    [ALLOWED, 101, 'ALLOWED_ORIGINS'],
    [undefined, 101, 'a non-browser client with a token']
  ])
  await table(t, stack, '', [['null', 403, 'no credential: an opaque page without a token']])
  await table(t, stack, `?t=${stack.token(CHAT, 'f')}`, [['null', 403, 'a files token never opens a socket']])
  await table(t, stack, `?t=${stack.token('other-chat')}`, [['null', 403, 'another chat\'s token']])
})

t.test('chat routes never answer Access-Control-Allow-Origin: *', gate, async t => {
  const stack = await terminalStack(t, { MCP_API_KEY: '', ALLOWED_ORIGINS: ALLOWED })
  await stack.app.sandbox.ensure(CHAT)
  const mcp = await connect(t, stack.url, { 'X-Chat-Id': CHAT })
  const bash = async (command: string): Promise<string> => ((await mcp.callTool({ name: 'bash_tool', arguments: { command, description: 'test' } }) as CallToolResult).content[0] as { text: string }).text
  await bash('mkdir -p /mnt/user-data/outputs && echo secret > /mnt/user-data/outputs/report.txt')
  const port = portOf(stack.url)
  const reads = [`/files/${CHAT}/report.txt`, `/files/${CHAT}/archive`, `/api/outputs/${CHAT}`, `/preview/${CHAT}`, `/terminal/${CHAT}`,
    `/terminal/${CHAT}/status`, `/browser/${CHAT}/status`]
  for (const path of reads) {
    for (const origin of [undefined, 'null', 'https://evil.example']) {
      const res = await fetch(`${stack.url}${path}`, { headers: origin === undefined ? {} : { origin } })
      await res.arrayBuffer()
      t.equal(res.headers.get('access-control-allow-origin'), null, `${path} from ${origin ?? '(no Origin)'}: no CORS header`)
    }
    for (const origin of [`http://localhost:${port}`, ALLOWED]) {
      const res = await fetch(`${stack.url}${path}`, { headers: { origin } })
      await res.arrayBuffer()
      t.equal(res.headers.get('access-control-allow-origin'), origin, `${path} from ${origin}: that origin, not *`)
      t.match(res.headers.get('vary'), /Origin/, 'Vary: Origin')
    }
  }
  // A state-changing request from a page that may not use the routes is refused before it runs.
  for (const origin of ['null', 'https://evil.example']) {
    const res = await fetch(`${stack.url}/terminal/${CHAT}/start-ttyd`, { method: 'POST', headers: { origin, 'content-type': 'application/json' }, body: '{}' })
    t.equal(res.status, 403, `start-ttyd from ${origin}`)
    t.match(await res.json(), { error: 'forbidden_origin' }, 'answered forbidden_origin')
  }
  t.equal((await stack.app.terminal.status(CHAT)).active, false, 'no terminal session was started')
})

t.test('real Chromium: a page of another site, and its sandboxed iframe, cannot reach the shell (open mode)', { skip: gate.skip || chromium.skip }, async t => {
  const stack = await terminalStack(t, { MCP_API_KEY: '' })
  await stack.app.sandbox.ensure(CHAT)
  const mcp = await connect(t, stack.url, { 'X-Chat-Id': CHAT })
  const bash = async (command: string): Promise<string> => ((await mcp.callTool({ name: 'bash_tool', arguments: { command, description: 'test' } }) as CallToolResult).content[0] as { text: string }).text
  await bash('mkdir -p /mnt/user-data/outputs && echo secret-output > /mnt/user-data/outputs/report.txt')
  const ws = stack.url.replace(/^http/, 'ws')
  // What a hostile page does: open the terminal socket, type a command, read a chat file, and report.
  const attack = `<script>
  const report = r => parent === window ? (document.body.dataset[r.where] = JSON.stringify(r)) : parent.postMessage(r, '*')
  const where = parent === window ? 'top' : 'framed'
  const result = { where, socket: 'pending', read: 'pending' }
  const done = () => { if (result.socket !== 'pending' && result.read !== 'pending') report(result) }
  const sock = new WebSocket('${ws}/terminal/${CHAT}/ws', ['tty'])
  sock.binaryType = 'arraybuffer'
  let screen = ''
  sock.onopen = () => { sock.send(JSON.stringify({ columns: 80, rows: 24 })); setTimeout(() => { result.socket = 'open'; done() }, 15000) }
  sock.onmessage = e => {
    const text = typeof e.data === 'string' ? e.data : new TextDecoder().decode(e.data)
    if (!text.startsWith('0') || screen.includes('$ ')) return
    screen += text.slice(1)
    if (screen.includes('$ ')) sock.send('0touch /tmp/pwned-' + where + '\\r')
  }
  sock.onerror = () => { result.socket = 'refused'; done() }
  fetch('${stack.url}/files/${CHAT}/report.txt').then(r => r.text()).then(x => { result.read = x }, () => { result.read = 'blocked'; }).finally(done)
  </script>`
  const html = `<!doctype html><body><iframe sandbox="allow-scripts" srcdoc="${attack.replace(/&/g, '&amp;').replace(/"/g, '&quot;')}"></iframe>
  <script>addEventListener('message', e => { document.body.dataset.framed = JSON.stringify(e.data) })</script>${attack}</body>`
  const evil = createServer((_req, res) => { res.writeHead(200, { 'content-type': 'text/html' }).end(html) })
  await new Promise<void>(resolve => evil.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { evil.closeAllConnections(); evil.close() })
  const browser = await launchChromium(t)
  const page = await browser.newPage()
  // gotoReady: a fetch lost to a network change of the Docker host would read as 'blocked'; the page is opened again.
  await gotoReady(page, `http://127.0.0.1:${(evil.address() as AddressInfo).port}/`, async () =>
    await page.waitForFunction('document.body.dataset.top !== undefined && document.body.dataset.framed !== undefined', undefined, { timeout: 40000 }))
  const top = JSON.parse(await page.evaluate('document.body.dataset.top') as string)
  const framed = JSON.parse(await page.evaluate('document.body.dataset.framed') as string)
  t.same(top, { where: 'top', socket: 'refused', read: 'blocked' }, 'a page of another site: socket refused, file unreadable')
  t.same(framed, { where: 'framed', socket: 'refused', read: 'blocked' }, 'its sandboxed iframe (Origin: null): socket refused, file unreadable')
  t.match(await bash('echo "pwned=$(ls /tmp/pwned-* 2>/dev/null | wc -l)"'), /pwned=0\b/, 'no command the pages typed ran in the sandbox')
})

t.test('real Chromium: in open mode the preview embedded in a sandboxed iframe says why it shows nothing', { skip: gate.skip || chromium.skip }, async t => {
  const stack = await terminalStack(t, { MCP_API_KEY: '' })
  const html = `<!doctype html><iframe id="embed" sandbox="allow-scripts allow-popups" style="width:1000px;height:600px" src="${stack.url}/preview/${CHAT}"></iframe>`
  const embedder = createServer((_req, res) => { res.writeHead(200, { 'content-type': 'text/html' }).end(html) })
  await new Promise<void>(resolve => embedder.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { embedder.closeAllConnections(); embedder.close() })
  const browser = await launchChromium(t)
  const page = await browser.newPage()
  const log: string[] = []
  page.on('console', msg => { if (msg.type() === 'error') log.push(msg.text()) })
  logRequestTrouble(page, log)
  await gotoReady(page, `http://127.0.0.1:${(embedder.address() as AddressInfo).port}/`, async () =>
    await orPageLog(log, (await embeddedFrame(page)).waitForSelector('#banner:not([hidden])', { timeout: 15000 })))
  const frame = await embeddedFrame(page)
  t.equal(await frame.evaluate('window.origin'), 'null', 'the preview runs with an opaque origin')
  t.match(await frame.textContent('#banner'), /open mode.*its own browser tab.*MCP_API_KEY/, 'the banner says why and what to do')
  t.equal(await frame.evaluate("document.getElementById('views').hidden"), true, 'no live views that could not connect')
})
