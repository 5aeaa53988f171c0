// Settings: parsing, validation and what each refuses (auth, OAuth, pool, skills, sizes), one group per part, all in one test process (docs/testing.md#the-unit-tiers-time).
import t from 'tap'
import Fastify from 'fastify'
import { loadConfig } from '../../core/config.js'
import { createAuthService } from '../../core/auth.js'
import { socketTimeouts } from '../../core/app.js'
import { TEST_API_KEY } from '../helper.js'
import { derivePoolSize } from '../../core/config-derive.js'
import { compactSize, humanSize } from '../../core/sizes.js'

t.test('config-auth', async t => {
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
})

t.test('config-oauth', async t => {
// an OAuth server that would be unsafe, or that nobody could sign in to, never boots.
  const base = { OAUTH_ENABLED: 'true', MCP_API_KEY: TEST_API_KEY, PUBLIC_BASE_URL: 'https://cubicle.example' }
  const oidc = { OIDC_ISSUER: 'https://accounts.example', OIDC_CLIENT_ID: 'cubicle', OIDC_ALLOWED_EMAILS: '*' }

  t.test('OAuth settings: defaults, and what the boot refuses', async t => {
    const off = loadConfig({})
    t.equal(off.OAUTH_ENABLED, false)
    t.equal(off.OAUTH_KEY_LOGIN, true)
    t.equal(off.OAUTH_ACCESS_TOKEN_TTL, 3600)
    t.equal(off.OAUTH_REFRESH_TOKEN_TTL, 2592000)
    t.equal(loadConfig(base).OAUTH_ENABLED, true)
    for (const url of ['http://127.0.0.1:8081', 'http://localhost:8081', 'http://[::1]:8081']) t.ok(loadConfig({ ...base, PUBLIC_BASE_URL: url }), url)
    t.throws(() => loadConfig({ ...base, MCP_API_KEY: '' }), /OAUTH_ENABLED.*needs MCP_API_KEY/)
    t.throws(() => loadConfig({ ...base, PUBLIC_BASE_URL: 'http://cubicle.example' }), /PUBLIC_BASE_URL.*https/)
    t.throws(() => loadConfig({ OAUTH_ENABLED: 'true', MCP_API_KEY: TEST_API_KEY }), /PUBLIC_BASE_URL/, 'the default public URL is plain http')
    t.throws(() => loadConfig({ ...base, OAUTH_KEY_LOGIN: 'false' }), /OAUTH_KEY_LOGIN.*no way to sign in/)
    t.ok(loadConfig({ ...base, ...oidc, OAUTH_KEY_LOGIN: 'false' }), 'OIDC alone is a way to sign in')
    t.throws(() => loadConfig({ ...base, ...oidc, OIDC_ISSUER: 'not a url' }), /OIDC_ISSUER/)
    t.throws(() => loadConfig({ ...base, ...oidc, OIDC_ISSUER: 'http://idp.example' }), /OIDC_ISSUER.*https/)
    t.ok(loadConfig({ ...base, ...oidc, OIDC_ISSUER: 'http://127.0.0.1:9000' }), 'http issuer on loopback')
    t.throws(() => loadConfig({ ...base, ...oidc, OIDC_CLIENT_ID: ' ' }), /OIDC_CLIENT_ID/)
    t.throws(() => loadConfig({ ...base, ...oidc, OIDC_ALLOWED_EMAILS: ' , ' }), /OIDC_ALLOWED_EMAILS/)
    t.throws(() => loadConfig({ ...base, OAUTH_ACCESS_TOKEN_TTL: '10' }), /OAUTH_ACCESS_TOKEN_TTL/)
  })

  // SINGLE_USER_MODE=true runs every caller in `default`: with OAuth, every person who signs in would share
  // one computer, so the boot refuses the pair and names both settings.
  t.test('OAUTH_ENABLED=true with SINGLE_USER_MODE=true is refused, naming both settings', async t => {
    for (const value of ['true', ' TRUE ']) {
      t.throws(() => loadConfig({ ...base, SINGLE_USER_MODE: value }), { code: 'CORE_INVALID_CONFIG', message: /SINGLE_USER_MODE.*OAUTH_ENABLED=true/ }, JSON.stringify(value))
    }
    t.equal(loadConfig({ ...base, SINGLE_USER_MODE: 'false' }).singleUserMode, 'false')
    t.equal(loadConfig({ ...base, SINGLE_USER_MODE: '' }).singleUserMode, 'lenient')
    t.equal(loadConfig({ SINGLE_USER_MODE: 'true' }).singleUserMode, 'true', 'without OAuth it stays allowed')
  })

  t.test('OIDC_ALLOWED_EMAILS: emails, @domains, bare domains and * in lowercase', async t => {
    const c = loadConfig({ ...base, ...oidc, OIDC_ALLOWED_EMAILS: ' Ann@Example.com, @Team.example ,partner.example,* ' })
    t.same(c.oidcAllowedEmails, ['ann@example.com', '@team.example', '@partner.example', '*'])
  })
})

t.test('config-pool', async t => {
  const GIB = 1024 ** 3

  t.test('SANDBOX_POOL_SIZE auto: min(2, CPUs, memory / 2 GiB)', async t => {
    t.equal(derivePoolSize('auto', { cpus: 8, memory: 64 * GIB }), 2, 'a large machine keeps 2')
    t.equal(derivePoolSize('auto', { cpus: 2, memory: 4 * GIB }), 2, '2 CPUs and 4 GiB: 2')
    t.equal(derivePoolSize('auto', { cpus: 1, memory: 16 * GIB }), 1, 'one CPU: 1')
    t.equal(derivePoolSize('auto', { cpus: 4, memory: 3.5 * GIB }), 1, '2 to 4 GiB: 1')
    t.equal(derivePoolSize('auto', { cpus: 4, memory: 1.5 * GIB }), 0, 'below 2 GiB: no pool')
    t.equal(derivePoolSize('7', { cpus: 1, memory: GIB }), 7, 'a number is taken as it is')
  })

  t.test('the default is auto, resolved for this machine; numbers 0 to 20; anything else stops the boot', async t => {
    const def = loadConfig({})
    t.equal(def.SANDBOX_POOL_SIZE, 'auto')
    t.equal(def.sandboxPoolSize, derivePoolSize('auto'))
    t.equal(loadConfig({ SANDBOX_POOL_SIZE: '0' }).sandboxPoolSize, 0)
    t.equal(loadConfig({ SANDBOX_POOL_SIZE: '20' }).sandboxPoolSize, 20)
    t.throws(() => loadConfig({ SANDBOX_POOL_SIZE: '21' }), { code: 'CORE_INVALID_CONFIG' })
    t.throws(() => loadConfig({ SANDBOX_POOL_SIZE: 'many' }), /SANDBOX_POOL_SIZE/)
  })
})

t.test('skills-config', async t => {
// the user skill cache as the Docker daemon sees it (the bind-mount sources)
  t.test('SKILLS_CACHE_HOST_PATH: explicit, else moved along with DATA_DIR_HOST, else the cache dir', async t => {
    t.equal(loadConfig({ DATA_DIR: '/data' }).skillsCacheHostDir, '/data/skills-cache', 'default: below DATA_DIR')
    t.equal(loadConfig({ DATA_DIR: '/data/', DATA_DIR_HOST: '/srv/cubicle' }).skillsCacheHostDir, '/srv/cubicle/skills-cache', 'below DATA_DIR_HOST')
    t.equal(loadConfig({ DATA_DIR: '/data', DATA_DIR_HOST: '/srv/cubicle', SKILLS_CACHE_DIR: '/data/cache/skills' }).skillsCacheHostDir, '/srv/cubicle/cache/skills')
    t.equal(loadConfig({ DATA_DIR: '/data', DATA_DIR_HOST: '/srv/cubicle', SKILLS_CACHE_DIR: '/database/skills' }).skillsCacheHostDir, '/database/skills', 'a sibling with the same prefix is not below DATA_DIR')
    t.equal(loadConfig({ DATA_DIR: '/data', DATA_DIR_HOST: '/srv/cubicle', SKILLS_CACHE_HOST_PATH: '/mnt/cache' }).skillsCacheHostDir, '/mnt/cache', 'explicit wins')
  })

  t.test('MCP_TOKENS_URL_ALLOW: http(s) origins only, normalised; anything else stops the boot naming the setting', async t => {
    t.same(loadConfig({}).mcpTokensUrlAllow, [])
    t.same(loadConfig({ MCP_TOKENS_URL_ALLOW: ' https://Settings.Example:443/ , http://10.0.0.5:8080 ' }).mcpTokensUrlAllow, ['https://settings.example', 'http://10.0.0.5:8080'])
    for (const bad of ['settings.example', 'https://settings.example/api', 'https://u@settings.example', 'https://settings.example?x=1', 'ftp://settings.example', 'https://']) {
      t.throws(() => loadConfig({ MCP_TOKENS_URL_ALLOW: bad }), { code: 'CORE_INVALID_CONFIG', message: /MCP_TOKENS_URL_ALLOW/ }, bad)
    }
  })

  t.test('SKILLS_CACHE_MAX_BYTES: 1 GiB by default, with size suffixes', async t => {
    t.equal(loadConfig({}).SKILLS_CACHE_MAX_BYTES, 1073741824)
    t.equal(loadConfig({ SKILLS_CACHE_MAX_BYTES: '200m' }).SKILLS_CACHE_MAX_BYTES, 200 * 1024 * 1024)
    t.throws(() => loadConfig({ SKILLS_CACHE_MAX_BYTES: '0' }), { code: 'CORE_INVALID_CONFIG' })
  })
})

t.test('sizes', async t => {
  t.test('sizes in words (descriptions and messages)', async t => {
    t.equal(humanSize(0), '0 bytes')
    t.equal(humanSize(1), '1 byte')
    t.equal(humanSize(512), '512 bytes')
    t.equal(humanSize(1024), '1.0 KiB')
    t.equal(humanSize(12_595), '12.3 KiB')
    t.equal(humanSize(4 * 1024 * 1024), '4.0 MiB')
    t.equal(humanSize(3 * 1024 ** 4), '3.0 TiB')
  })

  t.test('sizes the way ls -h prints them (listings)', async t => {
    t.equal(compactSize(0), '0')
    t.equal(compactSize(1023), '1023')
    t.equal(compactSize(1024), '1.0K')
    t.equal(compactSize(1536), '1.5K')
    t.equal(compactSize(20 * 1024), '20K')
    t.equal(compactSize(5 * 1024 * 1024), '5.0M')
    t.equal(compactSize(3 * 1024 ** 3), '3.0G')
    t.equal(compactSize(2 * 1024 ** 5), '2.0P')
  })
})
