import t from 'tap'
import Fastify from 'fastify'
import { loadConfig } from '../../core/config.js'
import { createAuthService } from '../../core/auth.js'

t.test('defaults match the configuration table of §10', async t => {
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
  const auth = createAuthService({ apiKey: 'sekrit' })
  t.equal(auth.isApiKey('sekrit'), true)
  t.equal(auth.isApiKey('sekrit '), false)
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
  t.equal((await app.inject({ url: '/c/a', headers: { authorization: 'Bearer sekrit' } })).statusCode, 200)
  t.equal((await app.inject('/c/a?t=tok-a-c')).statusCode, 200)
  t.equal((await app.inject('/c/b?t=tok-a-c')).statusCode, 403)
  t.equal((await app.inject({ url: '/c/a', headers: { authorization: 'Bearer tok-a-f' } })).statusCode, 403)
})
