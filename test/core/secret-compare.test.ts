/*
 * Secrets are compared in constant time (SECURITY.md "Identity and credentials"). Wall-clock timing
 * cannot be measured reliably on a shared machine, so these tests hold the form that makes it true:
 * every presented API key, whatever its length or content, is reduced to a SHA-256 digest and compared
 * with the key's digest by crypto.timingSafeEqual (no early exit on length or a first differing
 * byte), and every well-formed capability token's signature goes through timingSafeEqual too.
 */
import t from 'tap'
import * as crypto from 'node:crypto'
import { OTHER_API_KEY, TEST_API_KEY } from '../helper.js'

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
