import t from 'tap'
import { destinationOf, redirectHostsProblem } from '../../../plugins/oauth/destination.js'
import { renderConsent, renderLogin } from '../../../plugins/oauth/pages.js'

// The pages name where a request's code goes; a client's own name is never that destination.

t.test('destinationOf: the host of the redirect URI in ASCII, and what kind of place it is', async t => {
  t.same(destinationOf('https://Claude.AI/api/mcp/auth_callback'), { host: 'claude.ai', kind: 'web' })
  t.same(destinationOf('https://app.example:8443/cb'), { host: 'app.example:8443', kind: 'web' })
  t.same(destinationOf('https://cl\u0430ude.ai/cb'), { host: 'xn--clude-5ve.ai', kind: 'web' }, 'a Cyrillic а shows as punycode')
  t.same(destinationOf('http://127.0.0.1:3334/cb'), { host: '127.0.0.1:3334', kind: 'loopback' })
  t.same(destinationOf('http://[::1]:9/cb'), { host: '[::1]:9', kind: 'loopback' })
  t.same(destinationOf('http://localhost:1/cb'), { host: 'localhost:1', kind: 'loopback' })
  t.same(destinationOf('cursor://anysphere.cursor-mcp/oauth/callback'), { host: 'cursor://anysphere.cursor-mcp', kind: 'app' })
  t.same(destinationOf(undefined), { host: 'unknown', kind: 'unknown' })
  t.same(destinationOf('not a url'), { host: 'unknown', kind: 'unknown' })
  t.equal(destinationOf(`https://${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(50)}.example/`).host.length, 200, 'bounded')
})

t.test('redirectHostsProblem: one host, or loopback only', async t => {
  t.equal(redirectHostsProblem(['https://claude.ai/a', 'https://claude.ai/b']), undefined)
  t.equal(redirectHostsProblem(['https://app.example/a', 'http://app.example:8080/b']), undefined, 'one host name, any port or scheme')
  t.equal(redirectHostsProblem(['http://127.0.0.1:1/cb', 'http://localhost:2/cb', 'http://[::1]:3/cb']), undefined)
  t.match(redirectHostsProblem(['https://claude.ai/cb', 'https://evil.example/cb']), /^redirect_uris span more than one host \(claude\.ai, evil\.example\)/)
  t.match(redirectHostsProblem(['http://localhost:2/cb', 'https://evil.example/cb']), /more than one host/, 'loopback beside a site is two hosts')
  t.match(redirectHostsProblem(['myapp:/cb', 'https://evil.example/cb']), /more than one host/)
  t.equal(redirectHostsProblem('https://claude.ai/cb'), undefined, 'not an array: left to the provider')
  t.equal(redirectHostsProblem([42, 'https://claude.ai/cb']), undefined, 'non-strings: left to the provider')
})

t.test('pages: the destination is shown once, the name only as the app\'s claim, everything escaped; no Allow without a destination', async t => {
  const client = { name: 'Claude <b>', destination: destinationOf('https://evil.example/cb') }
  const login = renderLogin({ action: '/a', csrf: 'c', client, keyLogin: true })
  const consent = renderConsent({ action: '/a', csrf: 'c', client, subject: 'ann@example.com' })
  for (const html of [login, consent]) {
    t.match(html, /<code data-destination>evil\.example<\/code>/)
    t.equal(html.split('data-destination').length, 2)
    t.match(html, /calls itself <q>Claude &lt;b&gt;<\/q>/)
    t.notMatch(html, /<b>/)
  }
  t.match(consent, /value="allow"/)
  const unknown = renderConsent({ action: '/a', csrf: 'c', client: { name: 'Claude', destination: destinationOf(undefined) }, subject: 'owner' })
  t.notMatch(unknown, /value="allow"/, 'only Deny')
  t.match(unknown, /value="deny"/)
  t.match(unknown, /Do not continue/)
})
