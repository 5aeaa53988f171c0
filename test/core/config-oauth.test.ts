import t from 'tap'
import { loadConfig } from '../../core/config.js'
import { TEST_API_KEY } from '../helper.js'

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
