/*
 * Client ID Metadata Documents (docs/contract.md#oauth): a client whose client_id is the https URL of
 * its own metadata completes the authorization code flow without registering. The document is served
 * by this test over https on loopback under the name `app.test`; the plugin's test-only option
 * `clientMetadataFetch` maps that name to 127.0.0.1 and trusts the test's certificate (no setting
 * reaches it: in production only public addresses are fetched, test/plugins/oauth/outbound-fetch.test.ts).
 */
import t from 'tap'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { awayFromMinuteEdge, TEST_API_KEY } from '../helper.js'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { authorizeUrl, codeOf, CookieBrowser, exchangeCode, MemoryOAuthProvider, probeMcp, signInWithFetch, startOAuthServer, tokenRequest } from '../fixtures/oauth-server.js'
import { httpsServer, selfSignedCert } from '../fixtures/tls.js'
import type { ResolveHost } from '../../plugins/oauth/outbound-fetch.js'

const REDIRECT = 'http://127.0.0.1:45873/cb'

const pair = await selfSignedCert(['app.test'])
const documents = new Map<string, unknown>()
const serve = (req: IncomingMessage, res: ServerResponse): void => {
  const doc = documents.get(req.url ?? '')
  if (doc === undefined) { res.writeHead(404).end(); return }
  res.writeHead(200, { 'content-type': 'application/json' }).end(typeof doc === 'string' ? doc : JSON.stringify(doc))
}

t.test('a client identified by its metadata document URL signs in, gets tokens, refreshes', async t => {
  await awayFromMinuteEdge() // the fetch budget counts per wall-clock minute
  const site = await httpsServer(t, pair, serve)
  const resolve: ResolveHost = async host => {
    if (host !== 'app.test') throw new Error(`${host} is not the test's host`)
    return { address: '127.0.0.1', family: 4 }
  }
  const server = await startOAuthServer(t, { oauth: { registrationsPerMinute: 5, clientMetadataFetch: { resolve, ca: pair.cert } } })
  const { base } = server
  const doc = (path: string, extra: Record<string, unknown> = {}): string => {
    const clientId = `https://app.test:${site.port}${path}`
    documents.set(path, { client_id: clientId, client_name: 'Metadata App', redirect_uris: [REDIRECT], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none', ...extra })
    return clientId
  }

  t.test('the metadata advertises CIMD and public clients; registration stays', async t => {
    const as = await (await fetch(`${base}/.well-known/oauth-authorization-server`)).json() as Record<string, unknown>
    t.equal(as.client_id_metadata_document_supported, true)
    t.ok((as.token_endpoint_auth_methods_supported as string[]).includes('none'), 'none among the token endpoint auth methods')
    t.equal(as.registration_endpoint, `${base}/oauth/register`, 'DCR is kept for older clients')
  })

  t.test('the flow completes; the document is fetched once; the pages name its publisher', async t => {
    const clientId = doc('/client.json')
    const browser = new CookieBrowser()
    const page = await browser.follow(authorizeUrl(base, clientId, REDIRECT), REDIRECT)
    t.equal(page.status, 200)
    const html = await page.text()
    t.match(html, /data-destination>127\.0\.0\.1:45873</, 'the destination is this request\'s redirect URI')
    t.match(html, new RegExp(`data-publisher>app\\.test:${site.port}<`), 'and the host that published the description')
    t.match(html, /Metadata App/)
    const landed = await signInWithFetch(authorizeUrl(base, clientId, REDIRECT), REDIRECT, { email: 'meta@example.com' })
    const tokens = await exchangeCode(base, clientId, REDIRECT, landed)
    t.not((await probeMcp(base, tokens.access_token)).status, 401, 'the access token opens /mcp')
    const refreshed = await tokenRequest(base, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: clientId })
    t.equal(refreshed.status, 200, 'refresh works')
    t.not((await probeMcp(base, String(refreshed.body.access_token))).status, 401)
    t.same(site.requests.filter(p => p === '/client.json'), ['/client.json'], 'one fetch: the provider caches the document')
    const users = await (await fetch(`${base}/oauth/users`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } })).json() as { users: Array<{ subject: string, clients: string[] }> }
    t.same(users.users.find(u => u.subject === 'meta@example.com')?.clients, [clientId], 'the operator sees the client by its URL')
    const revoked = await fetch(`${base}/oauth/users/${encodeURIComponent('meta@example.com')}`, { method: 'DELETE', headers: { authorization: `Bearer ${TEST_API_KEY}` } })
    t.match(await revoked.json(), { grants: 1 })
    t.equal((await probeMcp(base, String(refreshed.body.access_token))).status, 401, 'revoking the user ends the token')
  })

  t.test('the official SDK client uses its clientMetadataUrl as client_id: no registration, then a session', async t => {
    const clientId = doc('/sdk-client.json', { client_name: 'SDK with a metadata URL' })
    let landed: URL | undefined
    const provider = new MemoryOAuthProvider(REDIRECT, async url => { landed = await signInWithFetch(url, REDIRECT, { email: 'sdk@example.com' }) }, 'SDK with a metadata URL')
    Object.defineProperty(provider, 'clientMetadataUrl', { value: clientId })
    const mcp = new URL('/mcp', base)
    const first = new StreamableHTTPClientTransport(mcp, { authProvider: provider })
    await t.rejects(new Client({ name: 'cimd-sdk', version: '1.0.0' }).connect(first), { message: /Unauthorized/ }, 'the first connect ends in the browser step')
    t.equal(provider.client?.client_id, clientId, 'the SDK took the URL as its client_id instead of registering')
    t.equal(provider.authorizationUrls[0]?.searchParams.get('client_id'), clientId)
    await first.finishAuth(codeOf(landed as URL))
    const client = new Client({ name: 'cimd-sdk', version: '1.0.0' })
    t.teardown(async () => { await client.close() })
    await client.connect(new StreamableHTTPClientTransport(mcp, { authProvider: provider }))
    t.same((await client.listTools()).tools, [], 'a session on the token (no tools without the sandbox plugins)')
  })

  t.test('documents that break the rules are refused, and so are fetches over the budget', async t => {
    const refused = async (clientId: string): Promise<string> => {
      const res = await new CookieBrowser().follow(authorizeUrl(base, clientId, REDIRECT), REDIRECT)
      t.equal(res.status, 400, clientId)
      return await res.text()
    }
    const twoHosts = doc('/two-hosts.json', { redirect_uris: ['https://a.example/cb', 'https://b.example/cb'] })
    t.match(await refused(twoHosts), /more than one host/, 'the one-host rule of registration applies')
    const other = `https://app.test:${site.port}/mismatch.json`
    documents.set('/mismatch.json', { client_id: 'https://elsewhere.example/x', redirect_uris: [REDIRECT] })
    t.match(await refused(other), /invalid_client/, 'client_id must be the document\'s own URL')
    documents.set('/big.json', JSON.stringify({ client_id: `https://app.test:${site.port}/big.json`, redirect_uris: [REDIRECT], client_name: 'x'.repeat(9000) }))
    t.match(await refused(`https://app.test:${site.port}/big.json`), /invalid_client/, 'over maxClientMetadataBytes')
    const before = site.requests.length
    t.match(await refused(`https://app.test:${site.port}/over-budget.json`), /invalid_client/, 'the sixth fetch this minute from one address')
    t.equal(site.requests.length, before, 'went out without a request')
  })

  t.test('a client_id URL naming a loopback address is never fetched with the production resolver', async t => {
    const plain = await startOAuthServer(t)
    const res = await new CookieBrowser().follow(authorizeUrl(plain.base, `https://127.0.0.1:${site.port}/client.json`, REDIRECT), REDIRECT)
    t.equal(res.status, 400)
    t.match(await res.text(), /invalid_client/)
    t.equal(site.requests.filter(p => p === '/client.json').length, 1, 'the loopback server saw no new request')
  })
})
