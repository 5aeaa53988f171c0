import t from 'tap'
import Fastify from 'fastify'
import { loadConfig } from '../../core/config.js'
import { createAuthService } from '../../core/auth.js'
import { socketTimeouts } from '../../core/app.js'
import { TEST_API_KEY } from '../helper.js'

t.test('defaults match the configuration table of docs/contract.md#routes-and-settings', async t => {
  const c = loadConfig({})
  t.equal(c.PORT, 8081)
  t.equal(c.publicBaseUrl, 'http://computer-use-server:8081')
  t.equal(c.CONTAINER_MEM_LIMIT, 2147483648)
  t.equal(c.MCP_MAX_BODY_BYTES, 16777216)
  t.equal(c.UPLOAD_MAX_BYTES, 104857600)
  t.equal(c.sandboxNetwork, 'cu-sandboxes')
  t.equal(c.dataDirHost, '/data')
  t.equal(c.singleUserMode, 'lenient')
  t.equal(c.subagentCli, 'claude')
  t.equal(c.LINK_TOKEN_TTL, 2592000)
})

t.test('parsing: booleans, sizes, trailing slash, aliases', async t => {
  const c = loadConfig({ ENABLE_NETWORK: 'No', CONTAINER_MEM_LIMIT: '512m', ARCHIVE_MAX_BYTES: '1G', PUBLIC_BASE_URL: 'https://x.example/', SUBAGENT_CLI: ' Codex ', DEBUG_LOGGING: 'yes', SANDBOX_PREFIX: 'abc', ALLOWED_ORIGINS: 'https://a.example, https://b.example/' })
  t.equal(c.ENABLE_NETWORK, false)
  t.equal(c.CONTAINER_MEM_LIMIT, 512 * 1024 * 1024)
  t.equal(c.ARCHIVE_MAX_BYTES, 1024 ** 3)
  t.equal(c.publicBaseUrl, 'https://x.example')
  t.equal(c.subagentCli, 'codex')
  t.equal(c.logLevel, 'debug')
  t.equal(c.sandboxNetwork, 'abc-sandboxes')
  t.same(c.allowedOrigins, ['https://a.example', 'https://b.example'])
})

t.test('bad values are refused naming the variable', async t => {
  t.throws(() => loadConfig({ COMMAND_TIMEOUT: '-5' }), /COMMAND_TIMEOUT/)
  t.throws(() => loadConfig({ SANDBOX_PREFIX: 'Bad Prefix' }), /SANDBOX_PREFIX/)
  t.throws(() => loadConfig({ ALLOWED_ORIGINS: 'not-an-origin' }), /ALLOWED_ORIGINS/)
  t.throws(() => loadConfig({ LOG_LEVEL: 'loud' }), /LOG_LEVEL/)
})

t.test('API key comparison and chat authorisation order: 401 without credentials, 403 with wrong ones', async t => {
  const auth = createAuthService({ apiKey: TEST_API_KEY })
  t.equal(auth.isApiKey(TEST_API_KEY), true)
  t.equal(auth.isApiKey(`${TEST_API_KEY} `), false)
  t.equal(auth.isApiKey(undefined), false)
  t.equal(createAuthService({ apiKey: '' }).isApiKey(''), false, 'open mode has no key to match')
  auth.addTokenVerifier((token, chatId, scope) => token === `tok-${chatId}-${scope}` ? 'ok' : 'forbidden')
  const app = Fastify()
  t.teardown(async () => { await app.close() })
  app.get('/c/:chat', async request => {
    const chat = (request.params as { chat: string }).chat
    auth.authorizeChat(request, chat, 'c')
    return { ok: true }
  })
  t.equal((await app.inject('/c/a')).statusCode, 401)
  t.equal((await app.inject({ url: '/c/a', headers: { authorization: `Bearer ${TEST_API_KEY}` } })).statusCode, 200)
  t.equal((await app.inject('/c/a?t=tok-a-c')).statusCode, 200)
  t.equal((await app.inject('/c/b?t=tok-a-c')).statusCode, 403)
  t.equal((await app.inject({ url: '/c/a', headers: { authorization: 'Bearer tok-a-f' } })).statusCode, 403)
})

// weak keys stop the boot with a message that says how to make a good one
t.test('MCP_API_KEY and LINK_SIGNING_KEY under 32 characters are refused, without echoing them', async t => {
  for (const name of ['MCP_API_KEY', 'LINK_SIGNING_KEY']) {
    const weak = 'hunter2-but-longer-29-chars!!'
    t.throws(() => loadConfig({ MCP_API_KEY: TEST_API_KEY, [name]: weak }), { code: 'CORE_INVALID_CONFIG' })
    try { loadConfig({ MCP_API_KEY: TEST_API_KEY, [name]: weak }) } catch (err) {
      const message = (err as Error).message
      t.match(message, name)
      t.match(message, /29 characters; at least 32/)
      t.match(message, /openssl rand -hex 32/)
      t.match(message, /node -e "console\.log\(require\('node:crypto'\)\.randomBytes\(32\)\.toString\('hex'\)\)"/)
      t.notMatch(message, weak, 'the secret is not in the message')
    }
    t.doesNotThrow(() => loadConfig({ MCP_API_KEY: TEST_API_KEY, [name]: 'x'.repeat(32) }), `${name}: 32 characters are enough`)
  }
  t.throws(() => loadConfig({ MCP_API_KEY: `${TEST_API_KEY} x` }), /MCP_API_KEY.*whitespace/, 'a key a header cannot carry')
  t.equal(loadConfig({ LINK_SIGNING_KEY: '' }).LINK_SIGNING_KEY, '', 'empty stays allowed (open mode / derived)')
})

// TRUST_PROXY is a hop count or an address list, never a blanket true
t.test('TRUST_PROXY parsing', async t => {
  t.equal(loadConfig({}).trustProxy, false, 'default: no proxy trusted')
  for (const off of ['false', 'no', '0', '']) t.equal(loadConfig({ TRUST_PROXY: off }).trustProxy, false, `'${off}'`)
  t.equal(loadConfig({ TRUST_PROXY: '1' }).trustProxy, 1)
  t.equal(loadConfig({ TRUST_PROXY: ' 2 ' }).trustProxy, 2)
  t.same(loadConfig({ TRUST_PROXY: '10.0.0.0/8, 127.0.0.1,::1,fd00::/8,loopback' }).trustProxy, ['10.0.0.0/8', '127.0.0.1', '::1', 'fd00::/8', 'loopback'])
  t.throws(() => loadConfig({ TRUST_PROXY: 'true' }), /TRUST_PROXY.*would trust any X-Forwarded-For.*hop/)
  t.throws(() => loadConfig({ TRUST_PROXY: 'yes' }), /TRUST_PROXY/)
  t.throws(() => loadConfig({ TRUST_PROXY: 'proxy.example.com' }), /TRUST_PROXY.*not an IP address or CIDR/)
  t.throws(() => loadConfig({ TRUST_PROXY: '10.0.0.0/33' }), /TRUST_PROXY.*prefix length/)
  t.throws(() => loadConfig({ TRUST_PROXY: '10.0.0.0/' }), /TRUST_PROXY.*prefix length/)
  t.throws(() => loadConfig({ TRUST_PROXY: '99' }), /TRUST_PROXY.*hops/)
})

// open mode stays on loopback unless HOST says otherwise
t.test('HOST defaults to 127.0.0.1 in open mode and 0.0.0.0 with a key; an explicit HOST wins', async t => {
  t.match(loadConfig({}), { host: '127.0.0.1', hostDefaultedToLoopback: true })
  t.match(loadConfig({ HOST: '  ' }), { host: '127.0.0.1', hostDefaultedToLoopback: true })
  t.match(loadConfig({ MCP_API_KEY: TEST_API_KEY }), { host: '0.0.0.0', hostDefaultedToLoopback: false })
  t.match(loadConfig({ HOST: '0.0.0.0' }), { host: '0.0.0.0', hostDefaultedToLoopback: false })
  t.match(loadConfig({ HOST: '127.0.0.1', MCP_API_KEY: TEST_API_KEY }), { host: '127.0.0.1', hostDefaultedToLoopback: false })
})

// a request timeout that bounds receiving only
t.test('REQUEST_TIMEOUT: 300 s by default; headers timeout and check interval follow it', async t => {
  t.equal(loadConfig({}).REQUEST_TIMEOUT, 300)
  t.same(socketTimeouts(300), { requestTimeout: 300_000, connectionTimeout: 0, keepAliveTimeout: 72_000, http: { headersTimeout: 60_000, connectionsCheckingInterval: 30_000 } })
  t.same(socketTimeouts(1).http, { headersTimeout: 1000, connectionsCheckingInterval: 250 })
  t.same(socketTimeouts(0), { requestTimeout: 0, connectionTimeout: 0, keepAliveTimeout: 72_000, http: { headersTimeout: 60_000, connectionsCheckingInterval: 30_000 } })
  t.throws(() => loadConfig({ REQUEST_TIMEOUT: 'soon' }), /REQUEST_TIMEOUT/)
})
