import t from 'tap'
import { createHmac, scryptSync } from 'node:crypto'
import Fastify from 'fastify'
import { createAuthService } from '../../../core/auth.js'
import { parseCapabilityToken } from '../../../core/tokens.js'
import capabilities from '../../../plugins/capabilities/index.js'
import { createLinkService } from '../../../plugins/capabilities/service.js'
import { OTHER_API_KEY, TEST_API_KEY } from '../../helper.js'

const DAY = 86400
const BASE = 'https://cubicle.example.com'
const at = (iso: string): () => number => () => Date.parse(iso)
const links = (opts: { apiKey?: string, signingKey?: string, ttl?: number, now?: () => number } = {}) => createLinkService({
  apiKey: opts.apiKey ?? TEST_API_KEY, signingKey: opts.signingKey ?? '', tokenTtlSeconds: opts.ttl ?? 2592000, publicBaseUrl: `${BASE}/`, now: opts.now
})

t.test('a token has the v1.<scope>.<exp>.<22-char base64url sig> format', async t => {
  const svc = links()
  t.equal(parseCapabilityToken(svc.token('chat-a', 'f') ?? '')?.scope, 'f')
  t.equal(parseCapabilityToken(svc.token('chat-a', 'c') ?? '')?.scope, 'c')
})

// the HMAC key comes from scrypt over the secret with a fixed, versioned salt (not a plain HMAC of it)
t.test('the signature is the first 16 bytes of HMAC-SHA256(scrypt(MCP_API_KEY or LINK_SIGNING_KEY), "v1|scope|exp|chat")', async t => {
  const scrypt = (secret: string): Buffer => scryptSync(secret, 'cubicle/link-signing/v2', 32, { N: 2 ** 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 })
  const token = links({ now: at('2026-03-10T12:00:00Z') }).token('chat-a', 'f') as string
  const [, , exp, sig] = token.split('.')
  const expected = createHmac('sha256', scrypt(TEST_API_KEY)).update(`v1|f|${exp}|chat-a`).digest().subarray(0, 16).toString('base64url')
  t.equal(sig, expected)
  const oldDerivation = createHmac('sha256', createHmac('sha256', TEST_API_KEY).update('link-signing-v1').digest()).update(`v1|f|${exp}|chat-a`).digest().subarray(0, 16).toString('base64url')
  t.not(sig, oldDerivation, 'the plain-HMAC derivation of before is gone')
  const explicit = 'explicit-link-signing-key-0123456789abcdef'
  const withSigningKey = links({ signingKey: explicit, now: at('2026-03-10T12:00:00Z') }).token('chat-a', 'f') as string
  const sig2 = createHmac('sha256', scrypt(explicit)).update(`v1|f|${exp}|chat-a`).digest().subarray(0, 16).toString('base64url')
  t.equal(withSigningKey.split('.')[3], sig2, 'LINK_SIGNING_KEY goes through the same derivation when set')
})

t.test('a secret under 32 characters is refused when the service is built', async t => {
  t.throws(() => links({ apiKey: 'x'.repeat(31) }), /MCP_API_KEY must be at least 32 characters/)
  t.throws(() => links({ signingKey: 'short-signing-key' }), /LINK_SIGNING_KEY must be at least 32 characters/)
  t.doesNotThrow(() => links({ apiKey: 'x'.repeat(32) }))
})

t.test('expiry is the next UTC midnight after now + TTL, so a token is stable for the whole day', async t => {
  const morning = links({ now: at('2026-03-10T00:00:01Z') }).token('chat-a', 'f') as string
  const evening = links({ now: at('2026-03-10T23:59:59Z') }).token('chat-a', 'f') as string
  t.equal(morning, evening, 'same token all day')
  const exp = Number(morning.split('.')[2])
  t.equal(exp % DAY, 0, 'exp is a midnight')
  t.equal(exp, Date.parse('2026-04-10T00:00:00Z') / 1000, '30 days later, rounded up to midnight')
  const nextDay = links({ now: at('2026-03-11T00:00:00Z') }).token('chat-a', 'f') as string
  t.not(nextDay, morning, 'a new day mints a new token')
})

t.test('verify: valid → ok; expired, wrong chat, tampered, other scope, garbage → forbidden', async t => {
  let now = Date.parse('2026-03-10T12:00:00Z')
  const svc = links({ ttl: 60, now: () => now })
  const f = svc.token('chat-a', 'f') as string
  const c = svc.token('chat-a', 'c') as string
  t.equal(svc.verify(f, 'chat-a', 'f'), 'ok')
  t.equal(svc.verify(c, 'chat-a', 'f'), 'ok', 'a control token grants files')
  t.equal(svc.verify(c, 'chat-a', 'c'), 'ok')
  t.equal(svc.verify(f, 'chat-a', 'c'), 'forbidden', 'a files token never grants control')
  t.equal(svc.verify(f, 'chat-b', 'f'), 'forbidden', 'a token for chat A never opens chat B')
  t.equal(svc.verify(f.replace('v1.f.', 'v1.c.'), 'chat-a', 'c'), 'forbidden', 'scope upgraded by hand')
  const [v, s, exp, sig] = f.split('.') as [string, string, string, string]
  t.equal(svc.verify(`${v}.${s}.${Number(exp) + DAY}.${sig}`, 'chat-a', 'f'), 'forbidden', 'expiry extended by hand')
  const flipped = sig.slice(0, -1) + (sig.endsWith('A') ? 'B' : 'A')
  t.equal(svc.verify(`${v}.${s}.${exp}.${flipped}`, 'chat-a', 'f'), 'forbidden', 'signature tampered')
  for (const junk of ['', 'v1', 'v2.f.1.AAAAAAAAAAAAAAAAAAAAAA', `${f}x`, `${f} `, TEST_API_KEY]) {
    t.equal(svc.verify(junk, 'chat-a', 'f'), 'forbidden', `garbage ${JSON.stringify(junk)}`)
  }
  now = Number(exp) * 1000
  t.equal(svc.verify(f, 'chat-a', 'f'), 'forbidden', 'expired at exp')
  now = Number(exp) * 1000 - 1
  t.equal(svc.verify(f, 'chat-a', 'f'), 'ok', 'valid until then')
})

t.test('rotating MCP_API_KEY or LINK_SIGNING_KEY revokes every link', async t => {
  const token = links({ apiKey: TEST_API_KEY }).token('chat-a', 'f') as string
  t.equal(links({ apiKey: TEST_API_KEY }).verify(token, 'chat-a', 'f'), 'ok', 'restarts with the same key keep links valid')
  t.equal(links({ apiKey: OTHER_API_KEY }).verify(token, 'chat-a', 'f'), 'forbidden')
  const signed = links({ signingKey: `s1-${TEST_API_KEY}` }).token('chat-a', 'f') as string
  t.equal(links({ signingKey: `s2-${TEST_API_KEY}` }).verify(signed, 'chat-a', 'f'), 'forbidden')
})

t.test('protected-mode URLs carry a files token; paths are encoded per segment', async t => {
  const svc = links({ now: at('2026-03-10T12:00:00Z') })
  const f = svc.token('chat-a', 'f') as string
  t.equal(svc.publicBaseUrl, BASE, 'trailing slash removed')
  t.equal(svc.filesBase('chat-a'), `${BASE}/files/chat-a/~${f}`)
  t.equal(svc.fileUrl('chat-a', 'dir/a b#c?.txt'), `${BASE}/files/chat-a/~${f}/dir/a%20b%23c%3F.txt`)
  t.equal(svc.filePath('chat-a', "x/it's (1).txt"), `/files/chat-a/~${f}/x/it%27s%20%281%29.txt`)
  t.equal(svc.archiveUrl('chat-a'), `${BASE}/files/chat-a/~${f}/archive`)
  t.equal(svc.previewUrl('chat-a', 'f'), `${BASE}/preview/chat-a?t=${f}`)
  t.match(svc.previewUrl('chat-a'), /\?t=v1\.c\./, 'the preview defaults to a control token')
  t.ok(svc.fileUrl('chat-a', 'x').startsWith(`${BASE}/files/chat-a/`), 'Open WebUI outlet prefix holds (docs/contract.md#open-webui)')
})

t.test('open mode mints no tokens and builds reference-shaped URLs', async t => {
  const svc = links({ apiKey: '' })
  t.equal(svc.token('chat-a', 'f'), undefined)
  t.equal(svc.filesBase('chat-a'), `${BASE}/files/chat-a`)
  t.equal(svc.fileUrl('chat-a', 'a b.txt'), `${BASE}/files/chat-a/a%20b.txt`)
  t.equal(svc.archiveUrl('chat-a'), `${BASE}/files/chat-a/archive`)
  t.equal(svc.previewUrl('chat-a'), `${BASE}/preview/chat-a`)
  t.equal(svc.verify('v1.f.9999999999.AAAAAAAAAAAAAAAAAAAAAA', 'chat-a', 'f'), 'forbidden')
})

t.test('the plugin decorates links and registers its verifier with core auth', async t => {
  const app = Fastify({ logger: false })
  t.teardown(async () => { await app.close() })
  app.decorate('auth', createAuthService({ apiKey: TEST_API_KEY }))
  await app.register(capabilities, { apiKey: TEST_API_KEY, publicBaseUrl: BASE })
  app.get('/c/:chat', async request => ({ used: app.auth.authorizeChat(request, (request.params as { chat: string }).chat, 'f') ?? null }))
  await app.ready()
  const token = app.links.token('chat-a', 'f') as string
  t.same((await app.inject({ url: `/c/chat-a?t=${token}` })).json(), { used: token })
  t.equal((await app.inject({ url: `/c/chat-b?t=${token}` })).statusCode, 403)
  t.equal((await app.inject({ url: '/c/chat-a' })).statusCode, 401)
})
