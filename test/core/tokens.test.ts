import t from 'tap'
import { buildApp, entry } from '../../core/app.js'
import { CAPABILITY_TOKEN, parseCapabilityToken, redactUrl, tokenOfPathSegment } from '../../core/tokens.js'
import capabilities from '../../plugins/capabilities/index.js'
import files from '../../plugins/files/index.js'
import chatStorage from '../../plugins/chat-storage/index.js'
import { TEST_API_KEY, testConfig } from '../helper.js'

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
  const ratio = cost(16000) / cost(2000)
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
