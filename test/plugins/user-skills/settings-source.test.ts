/*
 * Which settings service a request may make the server call: a client's X-Mcp-Tokens-Url counts only
 * for an authenticated caller and an origin the operator allowed, compared as parsed origins. Pure
 * policy, no network: the HTTP tests (test/http/settings-headers.test.ts) count real requests.
 */
import t from 'tap'
import type { FastifyBaseLogger } from 'fastify'
import type { RequestCredentials } from '../../../core/identity.js'
import { createSourcePolicy, settingsOrigin, type SourcePolicyOptions } from '../../../plugins/user-skills/settings-source.js'

interface Line { obj: Record<string, unknown>, msg: string }

function recorder (lines: Line[]): FastifyBaseLogger {
  const at = (obj: unknown, msg?: string): void => { lines.push({ obj: obj as Record<string, unknown>, msg: msg ?? '' }) }
  const log = { trace: at, debug: at, info: at, warn: at, error: at, fatal: at, silent: () => {}, level: 'trace', child: () => log }
  return log as unknown as FastifyBaseLogger
}

const OPERATOR = { url: 'https://settings.corp.example/base', apiKey: 'operator-key', allow: ['https://good.example', 'http://10.0.0.5:8080'] }

function policy (opts: Partial<SourcePolicyOptions> = {}): { pick: ReturnType<typeof createSourcePolicy>, lines: Line[] } {
  const lines: Line[] = []
  return { pick: createSourcePolicy({ ...OPERATOR, ...opts }, recorder(lines)), lines }
}

const pair = (url: string | undefined, caller?: 'key' | 'oauth'): RequestCredentials =>
  ({ ...(url !== undefined && { mcpTokensUrl: url }), mcpTokensApiKey: 'client-key', ...(caller !== undefined && { mcpTokensCaller: caller }) })

t.test('without a pair, or from a caller without credentials, the operator\'s service is used', async t => {
  const { pick, lines } = policy()
  t.match(pick(undefined), { url: OPERATOR.url, apiKey: 'operator-key' })
  t.match(pick({}), { url: OPERATOR.url, apiKey: 'operator-key' })
  t.match(pick(pair('https://good.example/x')), { url: OPERATOR.url, apiKey: 'operator-key' }, 'an allowed origin is not enough: the caller must be authenticated')
  t.match(pick(pair(undefined)), { url: OPERATOR.url, apiKey: 'operator-key' }, 'nor does the key alone count without authentication')
  t.match(lines, [{ obj: { origin: 'https://good.example', reason: 'not authenticated' } }, { obj: { origin: 'https://settings.corp.example', reason: 'not authenticated' } }])
  const none = policy({ url: '' })
  t.equal(none.pick(pair('https://good.example', undefined)), undefined, 'no service of the operator\'s: none at all')
})

t.test('an authenticated caller gets an allowed origin, with its path and key', async t => {
  const { pick, lines } = policy()
  for (const caller of ['key', 'oauth'] as const) {
    t.match(pick(pair('https://good.example/tenant-7/', caller)), { url: 'https://good.example/tenant-7', apiKey: 'client-key' }, caller)
    t.match(pick(pair('HTTPS://GOOD.example:443/a?x=1#f', caller)), { url: 'https://good.example/a', apiKey: 'client-key' }, 'same origin spelt otherwise; query and fragment dropped')
    t.match(pick(pair('http://10.0.0.5:8080', caller)), { url: 'http://10.0.0.5:8080', apiKey: 'client-key' })
    t.match(pick(pair('https://settings.corp.example/other', caller)), { url: 'https://settings.corp.example/other' }, 'MCP_TOKENS_URL\'s origin is allowed without listing it')
    t.match(pick(pair(undefined, caller)), { url: OPERATOR.url, apiKey: 'client-key' }, 'the key alone replaces the operator\'s key for the operator\'s service')
  }
  t.same(lines, [], 'nothing refused, nothing logged')
  const a = pick(pair('https://good.example/a', 'key'))
  const b = pick(pair('https://good.example/b', 'key'))
  t.not(a?.id, b?.id, 'two services never share cache entries')
})

t.test('lookalike origins are refused: exact origin match after parsing, never a prefix or substring', async t => {
  const { pick, lines } = policy()
  const lookalikes = [
    'https://good.example.evil.com',
    'https://good.example@evil.com',
    'https://good.example:x@evil.com/',
    'https://user@good.example',
    'https://evil.com/https://good.example',
    'https://evil.com/?u=https://good.example',
    'https://evil.com#https://good.example',
    'http://good.example',
    'https://good.example:8443',
    'https://good.examplex',
    'https://xgood.example',
    'http://10.0.0.5:80800',
    'http://10.0.0.5',
    'http://10.0.0.50:8080',
    'https://good.example%2eevil.com',
    'ftp://good.example',
    'javascript:alert(1)',
    'not a url'
  ]
  for (const url of lookalikes) {
    t.match(pick(pair(url, 'key')), { url: OPERATOR.url, apiKey: 'operator-key' }, url)
  }
  t.ok(lines.every(l => l.obj.reason === 'origin not allowed' || l.obj.reason === 'not an http(s) URL without user info'), 'each refusal says why')
  t.notOk(lines.some(l => JSON.stringify(l).includes('client-key')), 'the key never reaches the log')
})

t.test('a refusal is logged once per origin, and the memory of it is bounded', async t => {
  const { pick, lines } = policy({ maxLogged: 4 })
  for (let i = 0; i < 3; i++) pick(pair('https://evil.example/a', 'oauth'))
  pick(pair('https://evil.example/other/path', 'oauth'))
  t.equal(lines.length, 1, 'one line for one origin, whatever the path')
  t.same(lines[0]?.obj, { origin: 'https://evil.example', reason: 'origin not allowed' })
  for (let i = 0; i < 100; i++) pick(pair(`https://e${i}.example`, 'oauth'))
  t.equal(lines.length, 101, 'each new origin once')
  pick(pair('https://e99.example', 'oauth'))
  t.equal(lines.length, 101, 'a recent one is still remembered')
  pick(pair('https://e0.example', 'oauth'))
  t.equal(lines.length, 102, 'the oldest were forgotten (bounded memory) and log again')
})

t.test('settingsOrigin parses, and refuses user info and other schemes', async t => {
  t.equal(settingsOrigin(' https://Good.Example:443/x '), 'https://good.example')
  t.equal(settingsOrigin('http://[::1]:80/'), 'http://[::1]')
  for (const bad of ['https://a@good.example', 'https://:p@good.example', 'file:///etc/passwd', 'data:,x', '//good.example', '']) t.equal(settingsOrigin(bad), undefined, bad)
  t.throws(() => createSourcePolicy({ url: '', apiKey: '', allow: ['not an origin'] }, recorder([])), /MCP_TOKENS_URL_ALLOW/)
})
