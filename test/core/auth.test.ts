// Credentials and who may call: tokens, secret comparison, the failure throttle, identity, origins, the route kit, one group per part, all in one test process (docs/testing.md#the-unit-tiers-time).
import t from 'tap'
import { buildApp, entry } from '../../core/app.js'
import { CAPABILITY_TOKEN, parseCapabilityToken, redactUrl, tokenOfPathSegment } from '../../core/tokens.js'
import capabilities from '../../plugins/capabilities/index.js'
import files from '../../plugins/files/index.js'
import chatStorage from '../../plugins/chat-storage/index.js'
import { TEST_API_KEY, testConfig, OTHER_API_KEY, build } from '../helper.js'
import * as crypto from 'node:crypto'
import fp from 'fastify-plugin'
import type { FastifyInstance, InjectOptions, FastifyRequest } from 'fastify'
import { createFailureThrottle, throttleKey } from '../../core/failure-throttle.js'
import { chatKey, normalizeChatId } from '../../core/chat-id.js'
import { callerOf, cleanUserName, readUser, resolveMcpChat, userChatId, validEmail, type Principal } from '../../core/identity.js'
import { chatPaths } from '../../core/chat-paths.js'
import { createOriginPolicy, createOriginService } from '../../core/origin.js'
import type { Test } from 'tap'
import type WebSocket from 'ws'
import { chatAccess, chatOf, chatRoutes, mcpChat, noteKey, requireKey } from '../../core/route-kit.js'

t.test('tokens', async t => {
  const TOKEN = 'v1.f.1780000000.AbCdEfGhIjKlMnOpQrStUv'
  const SIG = 'AbCdEfGhIjKlMnOpQrStUv'

  t.test('the one token definition: exact shape, fields, path segment form', async t => {
    t.match(TOKEN, CAPABILITY_TOKEN)
    t.same(parseCapabilityToken(TOKEN), { scope: 'f', exp: 1780000000, sig: SIG })
    t.same(parseCapabilityToken('v1.c.1.AAAAAAAAAAAAAAAAAAAAAA'), { scope: 'c', exp: 1, sig: 'AAAAAAAAAAAAAAAAAAAAAA' })
    for (const bad of ['', `${TOKEN}x`, ` ${TOKEN}`, 'v1.x.1.AAAAAAAAAAAAAAAAAAAAAA', 'v1.f.1234567890123.AAAAAAAAAAAAAAAAAAAAAA', 'v1.f.1.AAAAAAAAAAAAAAAAAAAAA', 'V1.f.1.AAAAAAAAAAAAAAAAAAAAAA']) {
      t.equal(parseCapabilityToken(bad), null, `not a token: ${JSON.stringify(bad)}`)
    }
    t.equal(tokenOfPathSegment(`~${TOKEN}`), TOKEN)
    t.equal(tokenOfPathSegment(TOKEN), undefined, 'a path segment needs the ~')
    t.equal(tokenOfPathSegment(`~${TOKEN}.txt`), undefined)
  })

  // redaction after percent-decoding, in every spelling a client or proxy may use
  t.test('redactUrl hides tokens in the path and the query in any encoding', async t => {
    const cases: Array<[string, string]> = [
      [`/files/chat-a/~${TOKEN}/a.txt`, '/files/chat-a/~[redacted]/a.txt'],
      [`/files/chat-a/%7E${TOKEN}/a.txt`, '/files/chat-a/~[redacted]/a.txt'],
      [`/files/chat-a/%7e${TOKEN}/a.txt`, '/files/chat-a/~[redacted]/a.txt'],
      ['/files/chat-a/~v1%2Ef%2E1780000000%2EAbCdEfGhIjKlMnOpQrStUv/a.txt', '/files/chat-a/~[redacted]/a.txt'],
      [`/files/chat-a/%257E${TOKEN}/a.txt`, '/files/chat-a/~[redacted]/a.txt'],
      ['/files/chat-a/%76%31%2e%66%2e1780000000%2eAbCdEfGhIjKlMnOpQrStUv', '/files/chat-a/[redacted]'],
      [`/files/chat-a/x%2F~${TOKEN}`, '/files/chat-a/[redacted]'],
      [`/preview/chat-a?t=${TOKEN}`, '/preview/chat-a?t=[redacted]'],
      [`/preview/chat-a?%74=${TOKEN}`, '/preview/chat-a?%74=[redacted]'],
      [`/preview/chat-a?%54=${TOKEN}`, '/preview/chat-a?%54=[redacted]'],
      [`/preview/chat-a?T=${TOKEN}`, '/preview/chat-a?T=[redacted]'],
      [`/preview/chat-a?a=1&t=${TOKEN}&b=2`, '/preview/chat-a?a=1&t=[redacted]&b=2'],
      [`/api/outputs/chat-a?x=${encodeURIComponent(TOKEN)}`, '/api/outputs/chat-a?x=[redacted]'],
      [`/preview/chat-a?t=${TEST_API_KEY}`, '/preview/chat-a?t=[redacted]'],
      [`/files/chat-a/~${TEST_API_KEY}/a.txt`, '/files/chat-a/~[redacted]/a.txt'],
      ['/preview/chat-a?t', '/preview/chat-a?t=[redacted]']
    ]
    for (const [raw, want] of cases) {
      const got = redactUrl(raw)
      t.equal(got, want, raw)
      t.notMatch(got, SIG, `no signature left: ${raw}`)
    }
    t.equal(redactUrl('/files/chat-a/report%20v1.txt?download=1'), '/files/chat-a/report%20v1.txt?download=1', 'ordinary URLs are unchanged')
    t.equal(redactUrl('/files/chat-a/%E0%A4%A'), '/files/chat-a/%E0%A4%A', 'malformed encoding does not throw')
  })

  t.test('redactUrl is linear on hostile input (no backtracking)', async t => {
  // Scaling, not wall time: 8x longer input must cost about 8x (quadratic would be 64x), so load on the machine
  // cannot fail this test while a backtracking pattern still does.
    const hostile: Array<(n: number) => string> = [
      n => `/files/${'%25'.repeat(n / 3)}7E${TOKEN}`,
      n => `/x?${'t'.repeat(n)}=1`,
      n => `/${'v1.f.'.repeat(n / 5)}`,
      n => `/${'~'.repeat(n)}`,
      n => `/?${'&'.repeat(n)}`
    ]
    const cost = (n: number): number => {
      const urls = hostile.map(make => make(n))
      let best = Infinity
      for (let round = 0; round < 5; round++) {
        const start = process.hrtime.bigint()
        for (let i = 0; i < 16000 / n; i++) for (const url of urls) redactUrl(url)
        best = Math.min(best, Number(process.hrtime.bigint() - start))
      }
      return best
    }
    cost(2000) // warm up
    // The lowest of a few measurements: a preempted round (a loaded machine) only ever raises a ratio,
    // while a backtracking pattern is slow in every one of them.
    let ratio = Infinity
    for (let attempt = 0; attempt < 5 && ratio >= 4; attempt++) ratio = Math.min(ratio, cost(16000) / cost(2000))
    t.ok(ratio < 4, `the same number of characters costs ${ratio.toFixed(2)}x in 16 KiB URLs as in 2 KiB ones (linear ≈ 1, quadratic ≈ 8)`)
  })

  // what reaches the log, through the server's own logger configuration
  t.test('the request log line never carries a token or the key, however it is encoded', async t => {
    const lines: string[] = []
    const config = testConfig({ MCP_API_KEY: TEST_API_KEY, LOG_LEVEL: 'info', DATA_DIR: '/nonexistent-cubicle-data' })
    const app = await buildApp(config, [
      entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: '', tokenTtlSeconds: config.LINK_TOKEN_TTL, publicBaseUrl: config.publicBaseUrl }),
      entry(chatStorage, { dataDir: config.DATA_DIR }),
      entry(files, {})
    ], { logStream: { write: line => { lines.push(line) } } })
    t.teardown(async () => { await app.close() })
    await app.ready()
    const real = app.links.token('chat-a', 'f') as string
    const sig = real.split('.')[3] as string
    const urls = [
    `/files/chat-a/~${real}/a.txt`,
    `/files/chat-a/%7E${real}/a.txt`,
    `/files/chat-a/${real.replace(/\./g, '%2E').replace(/^/, '~')}/a.txt`,
    `/api/outputs/chat-a?t=${real}`,
    `/api/outputs/chat-a?%74=${real}`,
    `/api/outputs/chat-a?T=${encodeURIComponent(real)}`,
    `/api/outputs/chat-a?t=${TEST_API_KEY}`
    ]
    for (const url of urls) await app.inject({ url })
    const log = lines.join('')
    t.match(log, /incoming request/, 'requests were logged')
    t.equal(lines.filter(l => l.includes('"url":')).length, urls.length, 'one line with a url per request')
    t.notMatch(log, sig, 'no token signature in the log')
    t.notMatch(log, TEST_API_KEY, 'no API key in the log')
  })
})

/*
 * Secrets are compared in constant time (SECURITY.md "Identity and credentials"). Wall-clock timing
 * cannot be measured reliably on a shared machine, so these tests hold the form that makes it true:
 * every presented API key, whatever its length or content, is reduced to a SHA-256 digest and compared
 * with the key's digest by crypto.timingSafeEqual (no early exit on length or a first differing
 * byte), and every well-formed capability token's signature goes through timingSafeEqual too.
 */
t.test('secret-compare', async t => {
type Pair = [Buffer, Buffer]
const spyCrypto = (calls: Pair[]): typeof crypto => ({
  ...crypto,
  timingSafeEqual: (a: NodeJS.ArrayBufferView, b: NodeJS.ArrayBufferView) => {
    calls.push([Buffer.from(a.buffer, a.byteOffset, a.byteLength), Buffer.from(b.buffer, b.byteOffset, b.byteLength)])
    return crypto.timingSafeEqual(a, b)
  }
})

t.test('every presented API key is compared as a SHA-256 digest with timingSafeEqual, whatever its length', async t => {
  const calls: Pair[] = []
  const { createAuthService } = await t.mockImport<typeof import('../../core/auth.js')>('../../core/auth.js', { 'node:crypto': spyCrypto(calls) })
  const auth = createAuthService({ apiKey: TEST_API_KEY })
  const presented = ['', 'x', TEST_API_KEY.slice(0, -1), `${TEST_API_KEY}x`, TEST_API_KEY.toUpperCase(), `x${TEST_API_KEY.slice(1)}`,
    'é'.repeat(40), 'x'.repeat(100_000), OTHER_API_KEY, TEST_API_KEY]
  const results = presented.map(p => auth.isApiKey(p))
  t.same(results, presented.map(p => p === TEST_API_KEY), 'only the exact key matches')
  t.equal(calls.length, presented.length, 'every presented value is compared, none refused early')
  const keyDigest = crypto.createHash('sha256').update(TEST_API_KEY).digest()
  for (const [i, [given, expected]] of calls.entries()) {
    t.equal(given.length, 32, `value ${i}: 32 bytes compared whatever its length`)
    t.same(given, crypto.createHash('sha256').update(presented[i] ?? '').digest(), `value ${i}: its SHA-256 digest`)
    t.same(expected, keyDigest, `value ${i}: against the key's digest`)
  }
})

t.test('a capability token\'s signature is compared with timingSafeEqual, for a right and a wrong one alike', async t => {
  const calls: Pair[] = []
  const { createLinkService } = await t.mockImport<typeof import('../../plugins/capabilities/service.js')>('../../plugins/capabilities/service.js', { 'node:crypto': spyCrypto(calls) })
  const links = createLinkService({ apiKey: TEST_API_KEY, signingKey: '', tokenTtlSeconds: 3600, publicBaseUrl: 'http://cubicle.test' })
  const good = links.token('chat-a', 'f') as string
  const sig = good.split('.')[3] as string
  const wrongFirst = good.slice(0, -sig.length) + (sig[0] === 'A' ? 'B' : 'A') + sig.slice(1)
  const wrongLast = good.slice(0, -1) + (good.endsWith('A') ? 'B' : 'A')
  t.same([good, wrongFirst, wrongLast].map(tok => links.verify(tok, 'chat-a', 'f')), ['ok', 'forbidden', 'forbidden'])
  t.equal(calls.length, 3, 'each signature went through timingSafeEqual')
  for (const [given, expected] of calls) t.ok(given.length === 22 && expected.length === 22, 'the whole 22-character signature is compared')
})
})

t.test('auth-throttle', async t => {
/** A chat route and an API-key route on the real core (auth, error handler, trustProxy); tokens `tok-<chat>` are valid. */
  const probe = fp(async (fastify: FastifyInstance) => {
    fastify.auth.addTokenVerifier((token, chatId) => token === `tok-${chatId}` ? 'ok' : 'forbidden')
    fastify.get('/chat/:chat/*', async request => {
      const { chat, '*': rest } = request.params as { chat: string, '*': string }
      const first = rest.split('/')[0] ?? ''
      const used = fastify.auth.authorizeChat(request, chat, 'f', first.startsWith('~') ? first.slice(1) : undefined)
      return { used: used ?? null, ip: request.ip }
    })
    fastify.get('/key', async (request, reply) => {
      await fastify.auth.requireApiKey(request, reply)
      return { ip: request.ip }
    })
  }, { name: 'auth-probe' })

  async function app (t: Parameters<typeof build>[0], env: Record<string, string> = {}): Promise<FastifyInstance> {
    return await build(t, { MCP_API_KEY: TEST_API_KEY, ...env }, () => [entry(probe, {})])
  }

  const from = (remoteAddress: string, opts: InjectOptions): InjectOptions => ({ ...opts, remoteAddress })
  const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` })

  t.test('the throttle counts failures per address in one-minute windows', async t => {
    let now = Date.parse('2026-03-10T12:00:10Z')
    const throttle = createFailureThrottle({ limit: 3, now: () => now })
    const verdicts = [1, 2, 3, 4, 5].map(() => throttle.fail('192.0.2.1'))
    t.same(verdicts.map(v => v.throttled), [false, false, false, true, true], 'the fourth failure is over a limit of 3')
    t.same(verdicts.map(v => v.firstThrottled), [false, false, false, true, false], 'logged once')
    t.equal(verdicts[3]?.retryAfter, 50, 'Retry-After: seconds left in the window')
    t.equal(throttle.fail('192.0.2.2').throttled, false, 'another address has its own count')
    now += 50_000
    t.equal(throttle.fail('192.0.2.1').throttled, false, 'a new window starts clean')
  })

  t.test('the throttle keys IPv4-mapped addresses as IPv4 and IPv6 by /64', async t => {
    t.equal(throttleKey('::ffff:203.0.113.7'), '203.0.113.7')
    t.equal(throttleKey('203.0.113.7'), '203.0.113.7')
    t.equal(throttleKey('2001:db8:1:2:aaaa::1'), '2001:db8:1:2::/64')
    t.equal(throttleKey('2001:db8:1:2:ffff:ffff:ffff:ffff'), '2001:db8:1:2::/64', 'one subscriber cannot rotate inside its /64')
    t.equal(throttleKey('2001:db8:1:3::1'), '2001:db8:1:3::/64')
    t.equal(throttleKey('::1'), '0:0:0:0::/64')
    t.equal(throttleKey('fe80::1%eth0'), 'fe80:0:0:0::/64')
    t.equal(throttleKey('64:ff9b::192.0.2.1'), '64:ff9b:0:0::/64')
    const throttle = createFailureThrottle({ limit: 1, now: () => 0 })
    throttle.fail('2001:db8::1')
    t.equal(throttle.fail('2001:db8::2').throttled, true)
  })

  t.test('the throttle stays bounded under many addresses', async t => {
    const throttle = createFailureThrottle({ limit: 1, now: () => 0, maxAddresses: 100 })
    throttle.fail('198.51.100.1')
    for (let i = 0; i < 100; i++) throttle.fail(`10.0.${i >> 8}.${i & 255}`)
    t.equal(throttle.fail('198.51.100.1').throttled, false, 'the table started over instead of growing')
  })

  // check first, count only failures, never refuse a valid credential
  t.test('40 bad credentials from one address: bad ones get 429 with Retry-After, valid ones still pass', async t => {
    const server = await app(t)
    const addr = '198.51.100.9'
    for (let i = 0; i < 30; i++) {
      const res = await server.inject(from(addr, { url: '/chat/chat-a/x', query: { t: `bad-${i}` } }))
      t.equal(res.statusCode, 403, `failure ${i + 1} is answered normally`)
    }
    for (const opts of [{ url: '/chat/chat-a/x', query: { t: 'bad' } }, { url: '/chat/chat-a/x' }, { url: '/key', headers: bearer('wrong') }, { url: '/key' }]) {
      const res = await server.inject(from(addr, opts))
      t.equal(res.statusCode, 429, `over the limit: ${JSON.stringify(opts)}`)
      t.equal(res.json().error, 'too_many_requests')
      t.ok(Number(res.headers['retry-after']) >= 1 && Number(res.headers['retry-after']) <= 60, 'Retry-After in seconds')
    }
    t.equal((await server.inject(from(addr, { url: '/key', headers: bearer(TEST_API_KEY) }))).statusCode, 200, 'the API key on an API-key route')
    t.equal((await server.inject(from(addr, { url: '/chat/chat-a/x', headers: bearer(TEST_API_KEY) }))).statusCode, 200, 'the API key on a chat route')
    t.same((await server.inject(from(addr, { url: '/chat/chat-a/x', query: { t: 'tok-chat-a' } }))).json().used, 'tok-chat-a', 'a valid token in ?t=')
    t.equal((await server.inject(from(addr, { url: '/chat/chat-a/~tok-chat-a/x' }))).statusCode, 200, 'a valid ~token path')
    t.equal((await server.inject(from(addr, { url: '/chat/chat-a/x', headers: bearer('tok-chat-a') }))).statusCode, 200, 'a valid token as Bearer')
    t.equal((await server.inject(from('198.51.100.10', { url: '/chat/chat-a/x', query: { t: 'bad' } }))).statusCode, 403, 'other addresses are unaffected')
  })

  t.test('successes are not counted: 100 valid requests, then failures are answered normally', async t => {
    const server = await app(t)
    for (let i = 0; i < 100; i++) await server.inject(from('198.51.100.20', { url: '/key', headers: bearer(TEST_API_KEY) }))
    t.equal((await server.inject(from('198.51.100.20', { url: '/key', headers: bearer('wrong') }))).statusCode, 401)
  })

  // the master key is a Bearer header only
  t.test('the API key is refused as ?t= and as a ~ path segment on chat routes', async t => {
    const server = await app(t)
    const query = await server.inject({ url: '/chat/chat-a/x', query: { t: TEST_API_KEY } })
    t.equal(query.statusCode, 403)
    t.equal(query.json().error, 'forbidden')
    t.equal((await server.inject({ url: `/chat/chat-a/~${TEST_API_KEY}/x` })).statusCode, 403)
    t.equal((await server.inject({ url: '/chat/chat-a/x', headers: bearer(TEST_API_KEY) })).statusCode, 200, 'as Bearer it opens every chat')
    t.equal((await server.inject({ url: '/chat/chat-b/x', headers: { authorization: `bearer   ${TEST_API_KEY}  ` } })).statusCode, 200)
  })

  // TRUST_PROXY as a hop count or address list, never "trust any X-Forwarded-For"
  t.test('TRUST_PROXY unset: a forged X-Forwarded-For changes neither the address nor the count', async t => {
    const server = await app(t)
    for (let i = 0; i < 30; i++) {
      await server.inject(from('198.51.100.30', { url: '/key', headers: { ...bearer('wrong'), 'x-forwarded-for': `203.0.113.${i}` } }))
    }
    const res = await server.inject(from('198.51.100.30', { url: '/key', headers: { ...bearer('wrong'), 'x-forwarded-for': '203.0.113.200' } }))
    t.equal(res.statusCode, 429, 'rotating the forged header did not escape the throttle')
    const ok = await server.inject(from('198.51.100.30', { url: '/key', headers: { ...bearer(TEST_API_KEY), 'x-forwarded-for': '203.0.113.1' } }))
    t.equal(ok.json().ip, '198.51.100.30', 'the socket address is the client')
  })

  t.test('TRUST_PROXY=1: the client address is the entry the proxy appended', async t => {
    const server = await app(t, { TRUST_PROXY: '1' })
    const proxy = '10.0.0.2'
    const ok = await server.inject(from(proxy, { url: '/key', headers: { ...bearer(TEST_API_KEY), 'x-forwarded-for': '1.2.3.4, 203.0.113.7' } }))
    t.equal(ok.json().ip, '203.0.113.7', 'only one hop is trusted: the client-written 1.2.3.4 is ignored')
    for (let i = 0; i < 30; i++) await server.inject(from(proxy, { url: '/key', headers: { ...bearer('wrong'), 'x-forwarded-for': '203.0.113.7' } }))
    const throttled = await server.inject(from(proxy, { url: '/key', headers: { ...bearer('wrong'), 'x-forwarded-for': '203.0.113.7' } }))
    t.equal(throttled.statusCode, 429, 'the client behind the proxy is throttled')
    const neighbour = await server.inject(from(proxy, { url: '/key', headers: { ...bearer('wrong'), 'x-forwarded-for': '203.0.113.8' } }))
    t.equal(neighbour.statusCode, 401, 'another client behind the same proxy is not')
    const forged = await server.inject(from(proxy, { url: '/key', headers: { ...bearer('wrong'), 'x-forwarded-for': '203.0.113.7, 203.0.113.99' } }))
    t.equal(forged.statusCode, 401, 'a client-prepended entry does not change who is counted')
  })

  t.test('TRUST_PROXY as a CIDR list: X-Forwarded-For counts only when the peer is a listed proxy', async t => {
    const server = await app(t, { TRUST_PROXY: '10.0.0.0/8, 127.0.0.1' })
    const via = async (peer: string, xff: string): Promise<string> =>
      (await server.inject(from(peer, { url: '/key', headers: { ...bearer(TEST_API_KEY), 'x-forwarded-for': xff } }))).json().ip
    t.equal(await via('10.1.2.3', '203.0.113.7'), '203.0.113.7', 'a listed proxy')
    t.equal(await via('10.1.2.3', '203.0.113.7, 10.9.9.9'), '203.0.113.7', 'several listed hops are skipped')
    t.equal(await via('192.0.2.50', '203.0.113.7'), '192.0.2.50', 'an unlisted peer is the client itself')
  })
})

t.test('identity', async t => {
  t.test('chat ids: the accepted, normalised and rejected tables of docs/contract.md#chat-id-validation', async t => {
    for (const ok of ['default', 'abc123', 'my-session-123', 'local:9fz_x-1', 'n8n_42', 'a'.repeat(64)]) t.equal(normalizeChatId(ok), ok, ok)
    t.equal(normalizeChatId('A1B2C3D4-E5F6-7890-ABCD-EF1234567890'), 'a1b2c3d4-e5f6-7890-abcd-ef1234567890')
    t.equal(normalizeChatId('  my-chat  '), 'my-chat')
    t.equal(normalizeChatId('\tmy-chat\n'), 'my-chat')
    for (const bad of ['', '   ', '..x', 'a/b', 'a\\b', 'a b', 'a.b', '-abc', '_x', 'chat\u0000id', 'é', 'ｆｕｌｌ', '\u00a0x', 'a'.repeat(65), '%2e%2e', 'x\ny']) {
      t.equal(normalizeChatId(bad), null, JSON.stringify(bad))
    }
  })

  t.test('chat key is the first 32 hex chars of sha256 and distinct ids never collide into one name', async t => {
    t.equal(chatKey('default'), '37a8eec1ce19687d132fe29051dca629')
    t.not(chatKey('a-b'), chatKey('a_b'))
    const paths = chatPaths('/data', 'Some-Chat'.toLowerCase())
    t.equal(paths.dir, `/data/chats/${chatKey('some-chat')}`)
    t.notMatch(paths.uploads, /some-chat/)
  })

  t.test('user headers: email validation, name decoding, aliases and credentials', async t => {
    t.equal(validEmail('a@b.c'), 'a@b.c')
    for (const bad of ['a@@b', 'a b@c', '<a@b>', 'ab', '@b', 'a@', `${'x'.repeat(250)}@b.cd`, "o'neil@x.y"]) t.equal(validEmail(bad), undefined, bad)
    t.equal(cleanUserName('J%C3%BCrgen%20M'), 'Jürgen M')
    t.equal(cleanUserName('100%'), '100%', 'invalid percent-encoding kept as is')
    t.equal(cleanUserName('a\u0007b'), 'ab')
    t.equal(cleanUserName('x'.repeat(300))?.length, 128)
    const user = readUser({
      'x-openwebui-user-email': ' ann@example.com ',
      'x-gitlab-host': 'GitLab.Example.com:8443',
      'x-anthropic-base-url': 'https://evil.example',
      'x-mcp-tokens-url': 'https://evil.example',
      'x-mcp-servers': 'github, Jira,bad name,github,-x'
    })
    t.equal(user.email, 'ann@example.com')
    t.equal(user.credentials.gitlabHost, 'gitlab.example.com:8443')
    t.equal(user.credentials.anthropicBaseUrl, undefined, 'a client URL is ignored without a client key')
    t.equal(user.credentials.mcpTokensUrl, undefined)
    t.same(user.mcpServers, ['github', 'jira'])
    const withKey = readUser({ 'x-anthropic-api-key': 'sk', 'x-anthropic-base-url': 'https://gw.example/v1', 'x-user-email': 'bad email' })
    t.equal(withKey.credentials.anthropicBaseUrl, 'https://gw.example/v1')
    t.equal(withKey.emailRejected, true)
    t.equal(readUser({ 'x-gitlab-host': 'bad host/x' }).credentials.gitlabHost, undefined)
  })

  t.test('SINGLE_USER_MODE resolution: absence decides, not the value', async t => {
    t.same(resolveMcpChat({}, 'lenient'), { kind: 'chat', chatId: 'default', lenientNote: true })
    t.same(resolveMcpChat({ 'x-chat-id': 'default' }, 'lenient'), { kind: 'chat', chatId: 'default', lenientNote: false })
    t.same(resolveMcpChat({}, 'false'), { kind: 'missing' })
    t.same(resolveMcpChat({ 'x-chat-id': 'default' }, 'false'), { kind: 'chat', chatId: 'default', lenientNote: false })
    t.same(resolveMcpChat({ 'x-chat-id': 'a/b' }, 'true'), { kind: 'chat', chatId: 'default', lenientNote: false })
    t.equal(resolveMcpChat({ 'x-chat-id': 'a/b' }, 'lenient').kind, 'invalid')
  })

  // an OAuth token's subject is the user, and its chats stay below the user's own.
  t.test('OAuth principals: the token decides the user and keeps the chat among their own', async t => {
    const home = userChatId('alice@example.com')
    t.match(home, /^user:[0-9a-f]{20}$/)
    t.equal(userChatId('alice@example.com'), home, 'stable')
    t.not(userChatId('bob@example.com'), home)
    const alice: Principal = { kind: 'user', subject: 'alice@example.com', email: 'alice@example.com', name: 'Alice A' }
    t.same(resolveMcpChat({}, 'lenient', alice), { kind: 'chat', chatId: home, lenientNote: false }, 'no header: the user\'s own computer, no lenient note')
    t.same(resolveMcpChat({}, 'false', alice), { kind: 'chat', chatId: home, lenientNote: false }, 'strict mode needs no header either')
    t.same(resolveMcpChat({ 'x-chat-id': 'Proj-1' }, 'lenient', alice), { kind: 'chat', chatId: `${home}:proj-1`, lenientNote: false }, 'a header names a chat below the user\'s')
    t.same(resolveMcpChat({ 'x-chat-id': userChatId('bob@example.com') }, 'lenient', alice), { kind: 'chat', chatId: `${home}:${userChatId('bob@example.com')}`, lenientNote: false }, 'never another user\'s chat')
    t.same(resolveMcpChat({ 'x-chat-id': 'a'.repeat(38) }, 'lenient', alice), { kind: 'chat', chatId: `${home}:${'a'.repeat(38)}`, lenientNote: false }, '64 characters in all')
    t.match(resolveMcpChat({ 'x-chat-id': 'a'.repeat(39) }, 'lenient', alice), { kind: 'invalid', reason: /0,37/ }, 'too long once below the user\'s')
    t.match(resolveMcpChat({ 'x-chat-id': '../x' }, 'lenient', alice), { kind: 'invalid' })
    t.same(resolveMcpChat({}, 'true', alice), { kind: 'chat', chatId: 'default', lenientNote: false }, 'SINGLE_USER_MODE=true: one computer for all')
    t.same(resolveMcpChat({}, 'false', { kind: 'key' }), { kind: 'missing' }, 'the API key names no user: strict mode still needs the header')
    const user = readUser({ 'x-user-email': 'mallory@example.com', 'x-user-name': 'Mallory' }, alice)
    t.equal(user.email, 'alice@example.com', 'the token\'s email wins over X-User-Email')
    t.equal(user.name, 'Alice A')
    t.equal(readUser({ 'x-user-email': 'mallory@example.com' }).email, 'mallory@example.com', 'without a principal the header counts as before')
  })

  t.test('the settings-service pair says how its caller was authenticated: not at all, the key, or OAuth', async t => {
    const pair = { 'x-mcp-tokens-url': 'https://settings.example', 'x-mcp-tokens-api-key': 'k' }
    t.equal(callerOf(null), undefined)
    t.same(readUser(pair).credentials, { mcpTokensApiKey: 'k', mcpTokensUrl: 'https://settings.example' }, 'no caller: user-skills ignores the pair')
    t.same(readUser(pair, null).credentials, { mcpTokensApiKey: 'k', mcpTokensUrl: 'https://settings.example' }, 'no principal, as above')
    t.equal(readUser(pair, { kind: 'link', scope: 'c', token: 'tok' }).credentials.mcpTokensCaller, undefined, 'a capability token is no caller')
    t.equal(readUser(pair, { kind: 'key' }).credentials.mcpTokensCaller, 'key')
    t.equal(readUser(pair, { kind: 'user', subject: 'ann@example.com', email: 'ann@example.com' }).credentials.mcpTokensCaller, 'oauth')
    t.equal(readUser({ 'x-mcp-tokens-url': 'https://settings.example' }).credentials.mcpTokensCaller, undefined, 'no pair, no caller')
  })
})

t.test('origin', async t => {
// docs/contract.md#authentication-and-origin: loopback spellings of the public origin are the same origin; with
// PUBLIC_BASE_URL unset, http loopback origins on the listening port are ours.

  t.test('PUBLIC_BASE_URL unset: http loopback origins on the listening port are own, nothing else', async t => {
    const verdict = createOriginPolicy({ publicBaseUrl: 'http://computer-use-server:8081', publicBaseUrlSet: false, allowedOrigins: [] })
    for (const origin of ['http://127.0.0.1:40001', 'http://localhost:40001', 'http://[::1]:40001']) {
      t.equal(verdict(origin, 40001), 'own', origin)
    }
    t.equal(verdict('http://computer-use-server:8081', 40001), 'own', 'the default public origin itself')
    for (const [origin, why] of [
      ['http://127.0.0.1:40002', 'another port'],
      ['https://127.0.0.1:40001', 'https: this port speaks plain HTTP'],
      ['http://127.0.0.2:40001', 'only the three loopback spellings'],
      ['http://localhost.:40001', 'not a loopback spelling'],
      ['http://evil.example:40001', 'foreign host on our port'],
      ['http://127.0.0.1', 'default port 80'],
      ['null', 'opaque origin'],
      ['http://127.0.0.1:40001/', 'not a serialised origin (path)'],
      ['http://user@127.0.0.1:40001', 'not a serialised origin (userinfo)'],
      ['HTTP://LOCALHOST:40001', 'not a serialised origin (case)'],
      ['file://', 'scheme'],
      ['', 'empty'],
      [`http://${'a'.repeat(400)}.example`, 'too long']
    ] as const) {
      t.equal(verdict(origin, 40001), 'foreign', `${origin.slice(0, 40)}: ${why}`)
    }
    t.equal(verdict('http://127.0.0.1:40001', undefined), 'foreign', 'no listening port known, no loopback pass')
  })

  t.test('PUBLIC_BASE_URL on loopback: its loopback spellings with the same scheme and port are own', async t => {
    const verdict = createOriginPolicy({ publicBaseUrl: 'http://localhost:8081/', publicBaseUrlSet: true, allowedOrigins: [] })
    for (const origin of ['http://localhost:8081', 'http://127.0.0.1:8081', 'http://[::1]:8081']) t.equal(verdict(origin, 40001), 'own', origin)
    t.equal(verdict('http://127.0.0.1:40001', 40001), 'foreign', 'the listening port does not count once PUBLIC_BASE_URL is set')
    t.equal(verdict('https://127.0.0.1:8081', 8081), 'foreign', 'other scheme')
    t.equal(verdict('http://127.0.0.1:8082', 8082), 'foreign', 'other port')
    const https = createOriginPolicy({ publicBaseUrl: 'https://127.0.0.1', publicBaseUrlSet: true, allowedOrigins: [] })
    t.equal(https('https://localhost', 443), 'own', 'default ports compare equal')
    t.equal(https('https://localhost:443', 443), 'foreign', 'browsers never send a default port: not a serialised origin')
  })

  t.test('a public origin elsewhere: only itself and ALLOWED_ORIGINS, compared as serialised origins', async t => {
    const verdict = createOriginPolicy({ publicBaseUrl: 'https://CU.example.com/base', publicBaseUrlSet: true, allowedOrigins: ['https://Chat.Example.com', 'http://localhost:3000'] })
    t.equal(verdict('https://cu.example.com', 8081), 'own')
    t.equal(verdict('https://chat.example.com', 8081), 'listed', 'configured spelling is normalised')
    t.equal(verdict('http://localhost:3000', 8081), 'listed')
    t.equal(verdict('http://127.0.0.1:3000', 8081), 'foreign', 'aliases apply to the public origin only')
    t.equal(verdict('http://localhost:8081', 8081), 'foreign', 'loopback on the listening port: PUBLIC_BASE_URL is set')
    t.equal(verdict('https://cu.example.com.evil.example', 8081), 'foreign')
  })

  t.test('a bad PUBLIC_BASE_URL or ALLOWED_ORIGINS entry fails when the policy is built', async t => {
    t.throws(() => createOriginPolicy({ publicBaseUrl: 'not a url', publicBaseUrlSet: true, allowedOrigins: [] }), TypeError)
    t.throws(() => createOriginPolicy({ publicBaseUrl: 'http://a', publicBaseUrlSet: true, allowedOrigins: ['ftp://b'] }), TypeError)
  })

  // The chat-route rule (docs/architecture.md#security-model): null only in protected mode and with a credential.
  t.test('chat routes: null only with a credential in protected mode; foreign pages may read nothing and change nothing', async t => {
    const opts = { publicBaseUrl: 'https://cu.example', publicBaseUrlSet: true, allowedOrigins: ['https://chat.example'] }
    const request = (origin: string | undefined, more: { method?: string, url?: string, headers?: Record<string, string> } = {}): FastifyRequest => ({
      method: more.method ?? 'GET',
      url: more.url ?? '/api/outputs/c1',
      query: Object.fromEntries(new URL(more.url ?? '/api/outputs/c1', 'http://x').searchParams),
      headers: { ...(origin === undefined ? {} : { origin }), ...more.headers },
      socket: { localPort: 8081 }
    }) as unknown as FastifyRequest
    const token = `v1.f.99999999999.${'A'.repeat(22)}`
    const prot = createOriginService({ ...opts, protectedMode: true })
    const open = createOriginService({ ...opts, protectedMode: false })
    const rows: Array<[string, FastifyRequest, string | undefined, string | undefined, boolean, boolean]> = [
    // what, request, CORS protected, CORS open, refused protected, refused open
      ['no Origin (non-browser)', request(undefined), undefined, undefined, false, false],
      ['own origin', request('https://cu.example'), 'https://cu.example', 'https://cu.example', false, false],
      ['ALLOWED_ORIGINS', request('https://chat.example', { method: 'POST' }), 'https://chat.example', 'https://chat.example', false, false],
      ['foreign read', request('https://evil.example', { url: `/api/outputs/c1?t=${token}` }), undefined, undefined, false, false],
      ['foreign POST', request('https://evil.example', { method: 'POST', url: `/api/uploads/c1/x?t=${token}` }), undefined, undefined, true, true],
      ['foreign upgrade', request('https://evil.example', { headers: { upgrade: 'websocket' }, url: `/terminal/c1/ws?t=${token}` }), undefined, undefined, true, true],
      ['null, token in t', request('null', { url: `/api/outputs/c1?t=${token}` }), 'null', undefined, false, false],
      ['null, ~token in the path', request('null', { url: `/files/c1/~${token}/a.json` }), 'null', undefined, false, false],
      ['null, Bearer header', request('null', { method: 'POST', headers: { authorization: `Bearer ${token}` } }), 'null', undefined, false, true],
      ['null, preflight', request('null', { method: 'OPTIONS', headers: { 'access-control-request-method': 'POST' } }), 'null', undefined, false, false],
      ['null, no credential', request('null'), undefined, undefined, false, false],
      ['null POST, no credential', request('null', { method: 'POST' }), undefined, undefined, true, true],
      ['null upgrade with token', request('null', { headers: { upgrade: 'websocket' }, url: `/terminal/c1/ws?t=${token}` }), 'null', undefined, false, true],
      ['null upgrade, no token', request('null', { headers: { upgrade: 'websocket' }, url: '/terminal/c1/ws' }), undefined, undefined, true, true],
      ['a file named like a token is not one', request('null', { url: '/files/c1/~v1.f.1.short/a.json' }), undefined, undefined, false, false]
    ]
    for (const [what, req, corsP, corsO, refP, refO] of rows) {
      t.equal(prot.corsOrigin(req), corsP, `protected, ${what}: CORS ${String(corsP)}`)
      t.equal(open.corsOrigin(req), corsO, `open, ${what}: CORS ${String(corsO)}`)
      t.equal(prot.refuses(req), refP, `protected, ${what}: ${refP ? 'refused' : 'not refused'}`)
      t.equal(open.refuses(req), refO, `open, ${what}: ${refO ? 'refused' : 'not refused'}`)
    }
  })
})

t.test('route-kit', async t => {
/*
 * Core's route kit on the real core (auth, Origin rule, error handler): one HTTP chat route and one
 * WebSocket chat route built with the same kit, a key route, a route open to anonymous callers, an
 * /mcp-like route with an OAuth-style bearer verifier, and a route that uses none of it. Capability
 * tokens `tok-<chat>-<scope>` are valid; `oauth-alice` is Alice's bearer token on /mcp.
 */

  interface State { chat: string | null, principal: Principal | null }
  const state = (request: FastifyRequest): State => ({ chat: request.chat, principal: request.principal })

  const ALICE = { subject: 'alice@example.com', email: 'alice@example.com', name: 'Alice' }

  async function probe (fastify: FastifyInstance): Promise<void> {
    fastify.auth.addTokenVerifier((token, chatId, scope) => token === `tok-${chatId}-${scope}` ? 'ok' : 'forbidden')
    fastify.auth.addBearerVerifier({ routes: ['/mcp'], verify: async token => token === 'oauth-alice' ? ALICE : undefined, challenge: {} })
    await fastify.register(async routes => {
      chatRoutes(routes, ['/http/:chat'])
      routes.route({ method: ['GET', 'POST'], url: '/http/:chat', onRequest: chatAccess('c'), handler: async request => state(request) })
      routes.get('/ws/:chat', { websocket: true, onRequest: chatAccess('c') }, (socket, request) => {
        socket.send(JSON.stringify(state(request)))
      })
    })
    fastify.get('/key', { onRequest: requireKey }, async request => state(request))
    fastify.get('/anyone', async request => { noteKey(request); return state(request) })
    fastify.post('/mcp', { onRequest: requireKey }, async request => ({ resolution: mcpChat(request, 'false'), ...state(request) }))
    fastify.get('/plain', async request => state(request))
  }

  async function app (t: Test, env: Record<string, string> = { MCP_API_KEY: TEST_API_KEY }): Promise<FastifyInstance> {
    return await build(t, env, () => [entry(probe, {})])
  }

  const KEY_HEADER = { authorization: `Bearer ${TEST_API_KEY}` }
  const UPGRADE = { connection: 'upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' }

  interface Answer { status: number, body: unknown }

  /** The HTTP route's answer. */
  async function http (server: FastifyInstance, path: string, headers: Record<string, string> = {}, method: InjectOptions['method'] = 'GET'): Promise<Answer> {
    const res = await server.inject({ method, url: `/http/${path}`, headers })
    return { status: res.statusCode, body: res.json() }
  }

  /**
 * The socket route's answer: through a real upgrade (injectWS), the state its handler sent, or the
 * refused handshake's status; the body of a refusal comes from the same handshake injected as a
 * plain request (the hooks run before any upgrade, so they see the same request).
 */
  async function socket (server: FastifyInstance, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  // injectWS's request has no real socket: give the Origin rule the listening port it would read.
    const context = { headers, socket: { localPort: 80, remoteAddress: '127.0.0.1' } }
    // The handler sends as soon as the socket opens: listen from the start.
    let received: (text: string) => void = () => {}
    const message = new Promise<string>(resolve => { received = resolve })
    let ws: WebSocket
    try {
      ws = await server.injectWS(`/ws/${path}`, context as unknown as Parameters<FastifyInstance['injectWS']>[1], {
        onInit: client => { client.once('message', (data: Buffer) => { received(data.toString()) }) }
      })
    } catch (err) {
      const status = Number(/Unexpected server response: (\d+)/.exec((err as Error).message)?.[1])
      const refused = await server.inject({ url: `/ws/${path}`, headers: { ...headers, ...UPGRADE } })
      return { status, body: refused.statusCode === status ? refused.json() : `plain handshake answered ${refused.statusCode}` }
    }
    const body = JSON.parse(await message)
    ws.terminate()
    return { status: 101, body }
  }

  t.test('an HTTP route and a socket route of the kit get the same chat and principal', async t => {
    const server = await app(t)
    const cases: Array<[string, string, Record<string, string>, State]> = [
      ['the API key', 'Chat-1', KEY_HEADER, { chat: 'chat-1', principal: { kind: 'key' } }],
      ['a control token in ?t=', 'chat-1?t=tok-chat-1-c', {}, { chat: 'chat-1', principal: { kind: 'link', scope: 'c', token: 'tok-chat-1-c' } }],
      ['a control token as Bearer', 'chat-1', { authorization: 'Bearer tok-chat-1-c' }, { chat: 'chat-1', principal: { kind: 'link', scope: 'c', token: 'tok-chat-1-c' } }]
    ]
    for (const [name, path, headers, expected] of cases) {
      const viaHttp = await http(server, path, headers)
      const viaSocket = await socket(server, path, headers)
      t.same(viaHttp, { status: 200, body: expected }, `HTTP: ${name}`)
      t.same(viaSocket, { status: 101, body: expected }, `socket: ${name}`)
    }
  })

  t.test('a socket route refuses exactly what the HTTP route refuses, with the same answer', async t => {
    const server = await app(t)
    const cases: Array<[string, string, Record<string, string>, number, string]> = [
      ['an invalid chat id', 'a.b?t=tok-a.b-c', KEY_HEADER, 400, 'invalid_chat_id'],
      ['no credential', 'chat-1', {}, 401, 'Unauthorized'],
      ['a token of another chat', 'chat-1?t=tok-chat-2-c', {}, 403, 'forbidden'],
      ['a files token where control is needed', 'chat-1?t=tok-chat-1-f', {}, 403, 'forbidden'],
      ['the API key in ?t=', `chat-1?t=${TEST_API_KEY}`, {}, 403, 'forbidden'],
      ['a foreign Origin, even with the key', 'chat-1', { ...KEY_HEADER, origin: 'https://evil.example' }, 403, 'forbidden_origin'],
      ['an opaque Origin without a credential', 'chat-1', { origin: 'null' }, 403, 'forbidden_origin']
    ]
    for (const [name, path, headers, status, error] of cases) {
    // A state-changing request: the Origin rule refuses it as it refuses an upgrade.
      const viaHttp = await http(server, path, headers, 'POST')
      const viaSocket = await socket(server, path, headers)
      t.match(viaHttp, { status, body: { error } }, `HTTP: ${name}`)
      t.same(viaSocket, viaHttp, `socket: ${name}`)
    }
    const read = await server.inject({ url: '/http/chat-1', headers: { ...KEY_HEADER, origin: 'https://evil.example' } })
    t.equal(read.statusCode, 200, 'a cross-origin read is answered')
    t.equal(read.headers['access-control-allow-origin'], undefined, '... without CORS headers, so the page cannot read it')
    t.equal((await server.inject({ method: 'OPTIONS', url: '/http/chat-1', headers: { origin: 'http://cubicle.test', 'access-control-request-method': 'POST' } })).statusCode, 204, 'a preflight passes the access hook untouched')
  })

  t.test('open mode: the chat is decided, no principal is recorded, no credential is asked for', async t => {
    const server = await app(t, {})
    t.same(await http(server, 'Chat-1'), { status: 200, body: { chat: 'chat-1', principal: null } })
    t.same(await socket(server, 'Chat-1'), { status: 101, body: { chat: 'chat-1', principal: null } })
    t.same((await server.inject('/key')).json(), { chat: null, principal: null })
    t.match(await http(server, 'a.b'), { status: 400, body: { error: 'invalid_chat_id' } })
    t.match(await socket(server, 'a.b'), { status: 400, body: { error: 'invalid_chat_id' } })
    t.match(await socket(server, 'chat-1', { origin: 'null' }), { status: 403, body: { error: 'forbidden_origin' } }, 'no tokens in open mode, so an opaque page never gets a socket')
  })

  t.test('key routes, anonymous routes and /mcp record who the caller is; nothing leaks between requests', async t => {
    const server = await app(t)
    t.same((await server.inject({ url: '/key', headers: KEY_HEADER })).json(), { chat: null, principal: { kind: 'key' } })
    t.equal((await server.inject('/key')).statusCode, 401)
    t.equal((await server.inject({ url: '/key', headers: { authorization: 'Bearer oauth-alice' } })).statusCode, 401, 'a bearer verifier counts only on the routes it claims')
    t.same((await server.inject({ url: '/anyone', headers: KEY_HEADER })).json(), { chat: null, principal: { kind: 'key' } })
    t.same((await server.inject({ url: '/anyone', headers: { authorization: 'Bearer wrong' } })).json(), { chat: null, principal: null }, 'never refused')

    const mcp = async (headers: Record<string, string>): Promise<unknown> => (await server.inject({ method: 'POST', url: '/mcp', headers })).json()
    const home = userChatId(ALICE.subject)
    t.same(await mcp({ authorization: 'Bearer oauth-alice', 'x-chat-id': 'Proj' }), {
      resolution: { kind: 'chat', chatId: `${home}:proj`, lenientNote: false },
      chat: `${home}:proj`,
      principal: { kind: 'user', ...ALICE }
    }, 'an OAuth user: the token names the user, the chat stays below theirs')
    t.same(await mcp({ ...KEY_HEADER, 'x-chat-id': 'Proj' }), { resolution: { kind: 'chat', chatId: 'proj', lenientNote: false }, chat: 'proj', principal: { kind: 'key' } })
    t.same(await mcp(KEY_HEADER), { resolution: { kind: 'missing' }, chat: null, principal: { kind: 'key' } }, 'strict mode without a header: no chat')

    t.same((await server.inject({ url: '/plain', headers: KEY_HEADER })).json(), { chat: null, principal: null }, 'a route without the kit sees the initial nulls')
    t.same((await server.inject('/plain')).json(), { chat: null, principal: null }, 'and so does every later request')
  })

  t.test('the kit refuses the route that forgot its access hook instead of acting for no chat', async t => {
    const server = await build(t, {}, () => [entry(async (fastify: FastifyInstance) => {
      fastify.get('/forgot/:chat', async request => ({ chat: chatOf(request) }))
    }, {})])
    const res = await server.inject('/forgot/chat-1')
    t.equal(res.statusCode, 500)
    t.notMatch(res.body, /chat-1/, 'and the answer names nothing of the request')
  })
})
