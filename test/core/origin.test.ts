import t from 'tap'
import type { FastifyRequest } from 'fastify'
import { createOriginPolicy, createOriginService } from '../../core/origin.js'

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
