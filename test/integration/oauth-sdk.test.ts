/*
 * Claude's way in, end to end (docs/contract.md#oauth): the official MCP SDK client with its OAuth support
 * meets a protected server with no key: discovery from the 401, dynamic registration, the
 * authorization step through the real login page in Chromium, code exchange with PKCE, then
 * tools/call bash_tool in the user's own sandbox on real Docker. Then refresh, revocation, a token
 * of another server, wrong keys at the login page, and two users with two computers.
 */
import t, { type Test } from 'tap'
import type { Browser } from 'playwright-core'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { createRequire } from 'node:module'
import { chatKey } from '../../core/chat-id.js'
import { userChatId } from '../../core/identity.js'
import { awayFromMinuteEdge } from '../helper.js'
import { chromiumOrSkip, closeContext, gotoReady, launchChromium } from './chromium.js'
import { containersOfChat, dockerOrSkip, removeByPrefix } from './docker.js'
import { signInWithBrowser } from './oauth-browser.js'
import { authorizeUrl, codeOf, exchangeCode, freePort, MemoryOAuthProvider, probeMcp, registerClient, signInWithFetch, startOAuthServer, type OAuthServer } from '../fixtures/oauth-server.js'
import { tempDir } from '../fixtures/temp-dir.js'

const docker = await dockerOrSkip()
const chromium = chromiumOrSkip()
const gate = { skip: docker.skip !== false ? docker.skip : chromium.skip }
const REDIRECT = 'http://127.0.0.1:45871/callback'

const textOf = (r: CallToolResult): string => r.content[0]?.type === 'text' ? r.content[0].text : ''
const bash = async (c: Client, command: string): Promise<string> =>
  textOf(await c.callTool({ name: 'bash_tool', arguments: { command, description: 'test' } }) as CallToolResult)

interface Connected { client: Client, provider: MemoryOAuthProvider }

/** What Claude does: connect, get 401, register, send the user to the browser, exchange the code, connect again. */
async function connectAs (t: Test, server: OAuthServer, browser: Browser, email: string): Promise<Connected> {
  let landed: URL | undefined
  const provider = new MemoryOAuthProvider(REDIRECT, async url => { landed = await signInWithBrowser(browser, url, REDIRECT, { email }) })
  const mcp = new URL('/mcp', server.base)
  const first = new StreamableHTTPClientTransport(mcp, { authProvider: provider })
  await t.rejects(new Client({ name: 'claude-like', version: '1.0.0' }).connect(first), { message: /Unauthorized/ }, 'the first connect ends in the browser step')
  await first.finishAuth(codeOf(landed as URL))
  const client = new Client({ name: 'claude-like', version: '1.0.0' })
  t.teardown(async () => { await client.close() })
  await client.connect(new StreamableHTTPClientTransport(mcp, { authProvider: provider }))
  return { client, provider }
}

/**
 * Claude Desktop's bridge with no headers at all: mcp-remote meets the 401, registers, prints the
 * authorization URL (its own browser launch fails here: no display), and waits on its loopback
 * callback server. Chromium signs in and is sent there for real; the bridge exchanges the code.
 */
async function connectBridge (t: Test, server: OAuthServer, browser: Browser, email: string): Promise<Client> {
  const configDir = await tempDir(t, 'oauth-mcp-remote')
  const port = await freePort()
  const proxy = createRequire(import.meta.url).resolve('mcp-remote/dist/proxy.js')
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [proxy, `${server.base}/mcp`, String(port), '--host', '127.0.0.1', '--transport', 'http-only', '--auth-timeout', '120'],
    env: { PATH: process.env.PATH ?? '', HOME: configDir, MCP_REMOTE_CONFIG_DIR: configDir, BROWSER: 'false' },
    stderr: 'pipe'
  })
  let stderr = ''
  let signedIn: Promise<URL> | undefined
  transport.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8')
    const url = /Please authorize this client by visiting:\s+(\S+)/.exec(stderr)?.[1]
    if (url !== undefined && signedIn === undefined) {
      signedIn = signInWithBrowser(browser, url, `http://127.0.0.1:${port}/`, { email, deliver: true })
      signedIn.catch(() => {})
    }
  })
  const client = new Client({ name: 'claude-desktop-stand-in', version: '0.0.0' })
  t.teardown(async () => { await client.close() })
  try {
    await client.connect(transport)
  } catch (err) {
    t.comment(stderr)
    throw err
  }
  t.ok(signedIn !== undefined, 'the bridge asked for the browser step')
  t.match((await signedIn)?.searchParams.get('code'), /\S+/, 'the browser brought the code to the bridge\'s callback server')
  if (process.env.TEST_LOG === '1') t.comment(stderr)
  return client
}

t.test('OAuth with the MCP SDK client, Chromium and real Docker', gate, async t => {
  const server = await startOAuthServer(t, { plugins: ['mcp-transport', 'capabilities', 'sandbox-docker', 'sandbox', 'workspace-tools', 'files'], removeSandboxes: removeByPrefix })
  const browser = await launchChromium(t)
  const alice = await connectAs(t, server, browser, 'Alice@Example.com')

  t.test('discovery, registration and PKCE happened as Claude does them', async t => {
    const [url] = alice.provider.authorizationUrls
    t.equal(url?.origin + (url?.pathname ?? ''), `${server.base}/oauth/authorize`, 'authorization endpoint found from the 401 via RFC 9728 and RFC 8414 metadata')
    t.equal(url?.searchParams.get('code_challenge_method'), 'S256')
    t.match(url?.searchParams.get('code_challenge'), /^[A-Za-z0-9_-]{43}$/)
    t.equal(url?.searchParams.get('resource'), `${server.base}/mcp`, 'RFC 8707 resource indicator')
    t.match(alice.provider.client?.client_id, /^\S{20,}$/, 'dynamic client registration gave a client id')
    t.equal(alice.provider.saved?.token_type.toLowerCase(), 'bearer')
    t.ok((alice.provider.saved?.expires_in ?? 0) <= 3600, 'short-lived access token')
    t.match(alice.provider.saved?.refresh_token, /\S{20,}/)
  })

  t.test('tools/call bash_tool runs in the user\'s own sandbox', async t => {
    const chatId = userChatId('alice@example.com')
    t.equal(await bash(alice.client, 'printf %s "$CHAT_ID"'), chatId, 'no X-Chat-Id: the chat is derived from the token subject')
    t.equal((await containersOfChat(server.prefix, chatKey(chatId))).length, 1)
  })

  t.test('an OAuth user\'s outputs come back as working file links of their chat', async t => {
    const text = await bash(alice.client, 'echo hello-out > /mnt/user-data/outputs/report.txt')
    const link = /report\.txt: ([^\s\],]+)/.exec(text)?.[1]
    t.ok(link?.startsWith(`${server.base}/files/${encodeURIComponent(userChatId('alice@example.com'))}/`), `a link into the user's chat: ${link ?? text}`)
    const res = await fetch(link ?? '')
    t.equal(res.status, 200)
    t.equal(await res.text(), 'hello-out\n')
  })

  t.test('two users get two different sandboxes', async t => {
    const bob = await connectAs(t, server, browser, 'bob@example.com')
    await bash(alice.client, 'echo only-alice > ~/secret.txt')
    t.equal(await bash(bob.client, 'printf %s "$CHAT_ID"'), userChatId('bob@example.com'))
    t.match(await bash(bob.client, 'cat ~/secret.txt'), /No such file/)
    t.equal(await bash(alice.client, 'cat ~/secret.txt'), 'only-alice\n')
    t.not(userChatId('bob@example.com'), userChatId('alice@example.com'))
  })

  t.test('an expired access token is refreshed and the refresh token rotates', async t => {
    const before = alice.provider.saved
    alice.provider.saved = { ...before, access_token: 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' } as typeof before & object
    t.equal(await bash(alice.client, 'echo after-refresh'), 'after-refresh\n', 'the 401 made the SDK refresh and retry')
    t.not(alice.provider.saved?.access_token, before?.access_token)
    t.not(alice.provider.saved?.refresh_token, before?.refresh_token, 'rotated')
  })

  t.test('a token of another server (another audience) is refused with 401', async t => {
    const other = await startOAuthServer(t)
    const clientId = await registerClient(other.base, REDIRECT)
    const landed = await signInWithFetch(authorizeUrl(other.base, clientId, REDIRECT), REDIRECT, { email: 'alice@example.com' })
    const { access_token: token } = await exchangeCode(other.base, clientId, REDIRECT, landed)
    t.equal((await probeMcp(server.base, token)).status, 401)
    const there = new Client({ name: 'other', version: '1.0.0' })
    t.teardown(async () => { await there.close() })
    await there.connect(new StreamableHTTPClientTransport(new URL('/mcp', other.base), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }))
    t.same((await there.listTools()).tools, [], 'the same token works where it belongs (a server without tools)')
  })

  t.test('revoking the refresh token ends the access token at once: 401', async t => {
    const tokens = alice.provider.saved
    t.not((await probeMcp(server.base, tokens?.access_token ?? '')).status, 401)
    const res = await fetch(`${server.base}/oauth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: tokens?.refresh_token ?? '', token_type_hint: 'refresh_token', client_id: alice.provider.client?.client_id ?? '' }).toString()
    })
    t.equal(res.status, 200)
    const after = await probeMcp(server.base, tokens?.access_token ?? '')
    t.equal(after.status, 401)
    t.match(after.headers.get('www-authenticate'), /^Bearer resource_metadata="[^"]+\/\.well-known\/oauth-protected-resource\/mcp", error="invalid_token"$/)
    t.same(await after.json(), { error: 'Unauthorized' })
  })

  t.test('mcp-remote with no headers completes its OAuth flow, lists the tools and works in its user\'s sandbox', async t => {
    const bridge = await connectBridge(t, server, browser, 'dora@example.com')
    t.ok((await bridge.listTools()).tools.map(x => x.name).includes('bash_tool'))
    t.equal(await bash(bridge, 'printf %s "$CHAT_ID"'), userChatId('dora@example.com'))
  })

  t.test('a wrong key at the login page is refused, then throttled; the right key still signs in', async t => {
    const context = await browser.newContext()
    t.teardown(async () => { await closeContext(context) })
    const page = await context.newPage()
    const url = authorizeUrl(server.base, alice.provider.client?.client_id ?? '', REDIRECT)
    let status = 0
    page.on('response', r => { if (r.request().method() === 'POST') status = r.status() })
    await gotoReady(page, url, async () => { await page.locator('input[name=key]').waitFor() })
    const statuses: number[] = []
    // the login throttle counts in wall-clock minutes: 11 submissions in a real browser on a busy machine
    // took up to 30 s, so they start at least 45 s before the minute ends
    await awayFromMinuteEdge(45_000)
    for (let i = 0; i < 11; i++) {
      await page.fill('input[name=key]', `wrong-key-${i}-0123456789abcdef0123456789`)
      await page.click('button[type=submit]')
      await page.waitForSelector('[role=alert]')
      statuses.push(status)
    }
    t.same(statuses, [...Array<number>(10).fill(401), 429])
    t.match(await page.textContent('[role=alert]'), /Too many wrong keys/)
    t.equal(await page.inputValue('input[name=key]'), '', 'the key is never echoed back')
    const landed = await signInWithBrowser(browser, url, REDIRECT, { email: 'carol@example.com' })
    t.match(landed.searchParams.get('code'), /\S+/, 'a valid key is never refused by the throttle')
  })
})
