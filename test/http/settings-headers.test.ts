/*
 * The settings-service headers over real HTTP: X-Mcp-Tokens-Url makes the server call that address
 * only for an authenticated caller (the API key, an OAuth token) and an origin the operator allowed
 * (MCP_TOKENS_URL_ALLOW or MCP_TOKENS_URL's own). Two fake settings services on loopback count every
 * request they get: `good` is allowed, `evil` is not, and offers a user skill ZIP that must never
 * reach the cache. /mcp is driven by the official SDK client, with a real OAuth token.
 */
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { entries } from '../../fastify.config.js'
import { connect } from '../fixtures/mcp-probe.js'
import { rawZip, sha256, skillMd } from '../fixtures/raw-zip.js'
import { startSettingsService, type FakeSettings } from '../fixtures/settings-service.js'
import { listen, TEST_API_KEY } from '../helper.js'
import { authorizeUrl, exchangeCode, registerClient, signInWithFetch, startOAuthServer } from '../fixtures/oauth-server.js'
import { tempDir } from '../fixtures/temp-dir.js'

const EMAIL = 'a@b.c'
const KEY = { Authorization: `Bearer ${TEST_API_KEY}` }
const REDIRECT = 'http://127.0.0.1:45873/cb'
const PLUGINS = ['mcp-transport', 'capabilities', 'chat-storage', 'user-skills', 'prompt-render', 'tier-dynamic-instructions', 'tier-http'] as const

const loot = rawZip([{ name: 'SKILL.md', data: skillMd('loot', 'Planted by a foreign settings service.') }])

/** A fake settings service that enables a user skill for EMAIL (and serves its ZIP). */
async function service (t: Test, apiKey: string): Promise<FakeSettings> {
  const fake = await startSettingsService(t, apiKey)
  fake.users.set(EMAIL, [{ name: 'loot', category: 'user', zip_sha256: sha256(loot) }])
  fake.zips.set('loot', loot)
  return fake
}

const headersFor = (fake: FakeSettings, url = fake.url): Record<string, string> => ({ 'X-Mcp-Tokens-Url': url, 'X-Mcp-Tokens-Api-Key': fake.apiKey })

/** Everything below the skill cache (configs, skills, tmp), as relative paths. */
async function cacheListing (dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true }).catch(() => [])).map(String).sort()
}

/** Gives the server's fire-and-forget work (a download started by a render) time to show itself. */
const settle = async (): Promise<void> => { await new Promise(resolve => setTimeout(resolve, 300)) }

async function until (what: () => Promise<boolean> | boolean, ms = 5000): Promise<boolean> {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (await what()) return true
    await new Promise(resolve => setTimeout(resolve, 50))
  }
  return false
}

t.test('GET /system-prompt and /skill-list: the headers count only with the key and an allowed origin', async t => {
  const good = await service(t, 'good-key')
  const evil = await service(t, 'x')
  const dataDir = await tempDir(t, 'settings-headers')
  // An allowlist entry that is a string prefix of evil's origin (`http://127.0.0.1:4` of `…:41234`):
  // only a prefix comparison would let evil through.
  const evilPort = new URL(evil.url).port
  const prefix = `http://127.0.0.1:${evilPort.slice(0, evilPort.length - 1)}`
  const { url } = await listen(t, { MCP_API_KEY: TEST_API_KEY, DATA_DIR: dataDir, MCP_TOKENS_URL_ALLOW: `${good.url},${prefix}` }, config => entries(config, [...PLUGINS]))
  const cache = join(dataDir, 'skills-cache')
  const get = async (path: string, headers: Record<string, string>): Promise<number> => {
    const res = await fetch(`${url}${path}`, { headers })
    await res.text()
    return res.status
  }

  t.test('no credentials: no request leaves the server, even to an allowed origin', async t => {
    const before = await cacheListing(cache)
    t.equal(await get(`/system-prompt?user_email=${EMAIL}`, headersFor(evil)), 200)
    t.equal(await get(`/system-prompt?user_email=${EMAIL}`, { 'X-OpenWebUI-Mcp-Tokens-Url': `${evil.url}/any/path`, 'X-OpenWebUI-Mcp-Tokens-Api-Key': 'x' }), 200, 'the aliases too')
    t.equal(await get(`/system-prompt?user_email=${EMAIL}`, headersFor(good)), 200)
    t.equal(await get(`/system-prompt?user_email=${EMAIL}`, { ...headersFor(evil), Authorization: 'Bearer wrong-key-wrong-key-wrong-key-wrong' }), 200, 'a wrong key is no key')
    await settle()
    t.equal(evil.hits.any, 0, 'the foreign service got no request')
    t.equal(good.hits.any, 0, 'nor did the allowed one: the caller is not authenticated')
    t.same(await cacheListing(cache), before, 'nothing was downloaded or stored')
  })

  t.test('with the key: an origin that is not allowed is ignored, lookalikes included', async t => {
    for (const target of [evil.url, `${evil.url}/api/other`, `http://127.0.0.1:${new URL(good.url).port}@127.0.0.1:${evilPort}`]) {
      t.equal(await get(`/system-prompt?user_email=${EMAIL}`, { ...KEY, ...headersFor(evil, target) }), 200, target)
      t.equal(await get(`/skill-list?user_email=${EMAIL}`, { ...KEY, ...headersFor(evil, target) }), 200, target)
    }
    await settle()
    t.equal(evil.hits.any, 0, 'the foreign service got no request')
    t.notOk((await cacheListing(cache)).some(p => p.includes(sha256(loot))), 'its skill is not in the cache')
  })

  t.test('with the key and an allowed origin: the service is asked and its skill arrives', async t => {
    t.equal(await get(`/system-prompt?user_email=${EMAIL}`, { ...KEY, ...headersFor(good) }), 200)
    t.ok(await until(() => good.hits.download === 1), 'its configuration was read and its ZIP downloaded')
    t.ok(good.hits.config >= 1)
    const listed = await until(async () => {
      const res = await fetch(`${url}/skill-list?user_email=${EMAIL}`, { headers: { ...KEY, ...headersFor(good) } })
      return (await res.text()).includes('- loot: /mnt/skills/user/loot/SKILL.md')
    })
    t.ok(listed, 'the skill is listed for that request')
    t.equal(evil.hits.any, 0)
  })
})

t.test('/mcp as an OAuth user: the headers count only for an allowed origin', async t => {
  const good = await service(t, 'good-key')
  const evil = await service(t, 'x')
  const server = await startOAuthServer(t, { plugins: [...PLUGINS].filter(p => p !== 'chat-storage'), env: { MCP_TOKENS_URL_ALLOW: good.url } })
  const clientId = await registerClient(server.base, REDIRECT)
  const tokens = await exchangeCode(server.base, clientId, REDIRECT, await signInWithFetch(authorizeUrl(server.base, clientId, REDIRECT), REDIRECT, { email: EMAIL }))
  const bearer = { Authorization: `Bearer ${tokens.access_token}` }
  const cache = join(server.dataDir, 'skills-cache')

  t.test('an origin that is not allowed: no request, nothing stored', async t => {
    const before = await cacheListing(cache)
    const client = await connect(t, server.base, { ...bearer, ...headersFor(evil) })
    t.match(client.getInstructions(), /available_skills/, 'the instructions were rendered for the user')
    const lookalike = await connect(t, server.base, { ...bearer, ...headersFor(evil, `${good.url}@${new URL(evil.url).host}`) })
    t.ok(lookalike.getInstructions())
    await settle()
    t.equal(evil.hits.any, 0, 'the foreign service got no request')
    t.same(await cacheListing(cache), before, 'nothing was downloaded or stored')
  })

  t.test('an allowed origin: the user\'s skills come from it', async t => {
    const client = await connect(t, server.base, { ...bearer, ...headersFor(good) })
    t.ok(client.getInstructions())
    t.ok(await until(() => good.hits.download === 1), 'configuration read, ZIP downloaded')
    // Installed off the request path: a later connection's instructions list it.
    const listed = await until(async () => {
      const again = await connect(t, server.base, { ...bearer, ...headersFor(good), 'X-Chat-Id': 'second' })
      return again.getInstructions()?.includes('/mnt/skills/user/loot/SKILL.md') === true
    })
    t.ok(listed, 'the skill reaches the user\'s instructions')
    t.equal(evil.hits.any, 0)
  })
})
