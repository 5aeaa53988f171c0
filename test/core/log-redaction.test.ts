/*
 * What the server's own logger configuration lets into the log (SECURITY.md "Identity and
 * credentials"): a request line carries the method, the redacted URL, the request id and the client
 * address, never a header, so no credential header reaches the log on any outcome (200, 401, 404, 429,
 * 500); `token` and `apiKey` fields of logged objects are censored. Tokens in URLs: tokens.test.ts.
 */
import t from 'tap'
import type { Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildApp, entry } from '../../core/app.js'
import capabilities from '../../plugins/capabilities/index.js'
import files from '../../plugins/files/index.js'
import chatStorage from '../../plugins/chat-storage/index.js'
import { TEST_API_KEY, testConfig } from '../helper.js'

/** Every header that carries a credential (user and client integrations send these). */
const CREDENTIAL_HEADERS = ['authorization', 'cookie', 'x-api-key', 'x-gitlab-token', 'x-openwebui-gitlab-token',
  'x-anthropic-api-key', 'x-openwebui-anthropic-api-key', 'x-mcp-tokens-api-key', 'x-openwebui-mcp-tokens-api-key',
  'x-internal-api-key']

async function loggingApp (t: Test, lines: string[]): Promise<FastifyInstance> {
  const config = testConfig({ MCP_API_KEY: TEST_API_KEY, LOG_LEVEL: 'trace', DATA_DIR: '/nonexistent-cubicle-data' })
  const app = await buildApp(config, [
    entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: '', tokenTtlSeconds: config.LINK_TOKEN_TTL, publicBaseUrl: config.publicBaseUrl }),
    entry(chatStorage, { dataDir: config.DATA_DIR }),
    entry(files, {})
  ], { logStream: { write: line => { lines.push(line) } } })
  app.get('/boom', async () => { throw new Error('unexpected failure') })
  t.teardown(async () => { await app.close() })
  await app.ready()
  return app
}

t.test('no credential header reaches the log, whatever the request\'s outcome', async t => {
  const lines: string[] = []
  const app = await loggingApp(t, lines)
  const secrets = CREDENTIAL_HEADERS.map((name, i) => `secret-${i}-${name.replace(/-/g, '')}-0123456789abcdef`)
  const headers = (bearer: string): Record<string, string> => Object.fromEntries(CREDENTIAL_HEADERS.map((name, i) =>
    [name, name === 'authorization' ? `Bearer ${bearer}` : name === 'cookie' ? `session=${secrets[i] ?? ''}` : secrets[i] ?? '']))
  const outcomes: Array<[string, string, number]> = [
    ['/api/outputs/chat-a', TEST_API_KEY, 200], // the key: an empty listing
    ['/api/outputs/chat-a', secrets[0] ?? '', 403], // a wrong credential
    ['/no/such/route', TEST_API_KEY, 404],
    ['/boom', TEST_API_KEY, 500]
  ]
  for (const [url, bearer, status] of outcomes) {
    t.equal((await app.inject({ url, headers: headers(bearer) })).statusCode, status, `${url} answers ${status}`)
  }
  // Past the failure limit: the throttle's own warning is logged too.
  let throttled = 0
  for (let i = 0; i < 35; i++) if ((await app.inject({ url: '/api/outputs/chat-a', headers: headers(secrets[0] ?? '') })).statusCode === 429) throttled++
  t.ok(throttled > 0, `throttled ${throttled} times`)
  const log = lines.join('')
  t.equal(lines.filter(l => l.includes('"msg":"incoming request"')).length, outcomes.length + 35, 'every request was logged')
  t.match(log, /unexpected failure/, 'the 500 was logged with its error')
  t.match(log, /failed authentication attempts throttled/, 'the throttle warning was logged')
  for (const [i, secret] of secrets.entries()) t.notMatch(log, secret, `${CREDENTIAL_HEADERS[i] ?? ''} is not in the log`)
  t.notMatch(log, TEST_API_KEY, 'the API key is not in the log')
  t.notMatch(log, /"headers"/, 'no request line carries headers')
})

t.test('token and apiKey fields of a logged object are censored', async t => {
  const lines: string[] = []
  const app = await loggingApp(t, lines)
  const token = app.links.token('chat-a', 'f') as string
  app.log.info({ link: { token, chatId: 'chat-a' }, settings: { apiKey: 'settings-service-key-0123456789', url: 'http://settings.test' } }, 'logged by a plugin')
  const line = lines.find(l => l.includes('logged by a plugin')) ?? ''
  t.match(line, /"chatId":"chat-a"/, 'the other fields stay')
  t.match(line, /"token":"\[redacted\]"/)
  t.match(line, /"apiKey":"\[redacted\]"/)
  t.notMatch(line, token.split('.')[3] as string)
  t.notMatch(line, 'settings-service-key')
})
