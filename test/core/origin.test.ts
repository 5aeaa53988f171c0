import t from 'tap'
import { createOriginPolicy } from '../../core/origin.js'

// surface.md §2.6 item 6 (Revised): loopback spellings of the public origin are the same origin; with
// PUBLIC_BASE_URL unset, http loopback origins on the listening port are ours. // issue #8

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
