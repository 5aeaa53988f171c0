import t from 'tap'
import fp from 'fastify-plugin'
import type { FastifyInstance, InjectOptions } from 'fastify'
import { entry } from '../../core/app.js'
import { createFailureThrottle, throttleKey } from '../../core/failure-throttle.js'
import { build, TEST_API_KEY } from '../helper.js'

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
