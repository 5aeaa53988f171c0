// Errors: one identity each, the catalogue docs/errors.md, the bodies of 4xx/5xx answers and the logs, one group per part, all in one test process (docs/testing.md#the-unit-tiers-time).
import Fastify from 'fastify'
import t, { type Test } from 'tap'
import { errorHandler } from '../../core/error-handler.js'
import { defineError, definitionOf, INTERNAL_ERROR, isNamedFailure, isOneOf, wireCodeOf, FRAMEWORK_WIRE, isErrorDefinition, type ErrorDefinition } from '../../core/errors.js'
import { errorResult, MAX_TOOL_ERROR_CHARS } from '../../core/tool-result.js'
import { existsSync, readdirSync, readFileSync, mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { tmpdir } from 'node:os'
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify'
import { chatPaths } from '../../core/chat-paths.js'
import { build, TEST_API_KEY, testConfig } from '../helper.js'
import { buildApp, entry } from '../../core/app.js'
import capabilities from '../../plugins/capabilities/index.js'
import files from '../../plugins/files/index.js'
import chatStorage from '../../plugins/chat-storage/index.js'

t.test('errors', async t => {
/* The identity of an error (core/errors.ts) and the one shape of a tool error (core/tool-result.ts). */

  const TEST_TOO_LARGE = defineError('TEST_TOO_LARGE', 'too_large_here', 'more than %d bytes', 413)
  const TEST_ENGINE_GONE = defineError('TEST_ENGINE_GONE', 'engine_gone', 'the engine is gone', 503)
  const TEST_BROKEN = defineError('TEST_BROKEN', INTERNAL_ERROR, 'broken: %s', 500)

  t.test('a definition carries its code, wire code, status and message template', async t => {
    const err = new TEST_TOO_LARGE(10, { cause: new Error('inner') })
    t.match(err, { code: 'TEST_TOO_LARGE', statusCode: 413, message: 'more than 10 bytes', wireCode: 'too_large_here' })
    t.ok(err instanceof TEST_TOO_LARGE)
    t.equal((err.cause as Error).message, 'inner')
    const { code, wire, statusCode, message } = TEST_TOO_LARGE
    t.same({ code, wire, statusCode, message }, { code: 'TEST_TOO_LARGE', wire: 'too_large_here', statusCode: 413, message: 'more than %d bytes' })
    t.notOk(Object.keys(err).includes('wireCode'), 'the wire code is the definition\'s, not copied onto each error (nor into logs)')
    t.equal(definitionOf(err), TEST_TOO_LARGE)
  })

  t.test('defineError refuses a bad wire code, internal_error below 500 and a code defined twice', async t => {
    t.throws(() => defineError('TEST_BAD_WIRE', 'Bad-Wire', 'x', 400), TypeError)
    t.throws(() => defineError('TEST_BAD_WIRE', 'bad__wire', 'x', 400), TypeError)
    t.throws(() => defineError('TEST_INTERNAL_4XX', INTERNAL_ERROR, 'x', 404), /only a 5xx/)
    t.throws(() => defineError('TEST_TOO_LARGE', 'other', 'x', 400), /defined twice/)
  })

  t.test('wireCodeOf: by the definition, never by a prefix of the code', async t => {
    t.equal(wireCodeOf(new TEST_TOO_LARGE(1), 413), 'too_large_here')
    t.equal(wireCodeOf(new TEST_BROKEN('x'), 500), INTERNAL_ERROR)
    // An error that crossed a plugin boundary by code (as fakes throw them) counts only with the definition's status.
    t.equal(wireCodeOf(Object.assign(new Error('x'), { code: 'TEST_ENGINE_GONE', statusCode: 503 }), 503), 'engine_gone')
    t.equal(wireCodeOf(Object.assign(new Error('x'), { code: 'TEST_ENGINE_GONE' }), 500), INTERNAL_ERROR)
    // Unknown codes, whatever they look like, fall back by status.
    t.equal(wireCodeOf(Object.assign(new Error('x'), { code: 'TEST_UNKNOWN_THING', statusCode: 400 }), 400), 'bad_request')
    t.equal(wireCodeOf(Object.assign(new Error('x'), { code: 'TEST_UNKNOWN_THING', statusCode: 404 }), 404), 'not_found')
    t.equal(wireCodeOf(new Error('x'), 502), INTERNAL_ERROR)
    // A wire code pasted onto an error is not an identity.
    t.equal(wireCodeOf(Object.assign(new Error('x'), { wireCode: 'made_up' }), 400), 'bad_request')
  })

  t.test('isNamedFailure and isOneOf', async t => {
    t.ok(isNamedFailure(new TEST_ENGINE_GONE()), 'a 5xx with a wire code of its own')
    t.notOk(isNamedFailure(new TEST_BROKEN('x')), 'internal_error')
    t.notOk(isNamedFailure(new TEST_TOO_LARGE(1)), 'a 4xx')
    t.notOk(isNamedFailure(new Error('x')))
    const mod = { TEST_TOO_LARGE, TEST_BROKEN, helper: () => 1 }
    t.ok(isOneOf(new TEST_TOO_LARGE(1), mod))
    t.notOk(isOneOf(new TEST_ENGINE_GONE(), mod))
    t.notOk(isOneOf(Object.assign(new Error('x'), { code: 'TEST_TOO_LARGE' }), mod), 'by identity, not by code')
  })

  t.test('the handler: wire code, extra fields and headers below 500; a reference and the log at 500', async t => {
    const lines: string[] = []
    const app = Fastify({ logger: { level: 'error', stream: { write: (line: string) => { lines.push(line) } } } })
    app.setErrorHandler(errorHandler)
    app.get('/413', async () => { throw Object.assign(new TEST_TOO_LARGE(5), { extra: { limit: 5 }, headers: { 'x-limit': '5' } }) })
    app.get('/503', async () => { throw new TEST_ENGINE_GONE() })
    app.get('/500', async () => { throw new TEST_BROKEN('/var/lib/secret-place') })
    t.teardown(async () => await app.close())
    const tooLarge = await app.inject('/413')
    t.same(tooLarge.json(), { error: 'too_large_here', detail: 'more than 5 bytes', limit: 5 })
    t.equal(tooLarge.headers['x-limit'], '5')
    t.same((await app.inject('/503')).json().error, 'engine_gone')
    const broken = await app.inject('/500')
    t.equal(broken.json().error, INTERNAL_ERROR)
    t.notMatch(broken.body, /secret-place/, 'the message stays in the log')
    t.match(lines.join(''), /secret-place/)
  })

  t.test('errorResult: one text block beginning Error:, at most 2,000 code points', async t => {
    t.same(errorResult('no such file'), { isError: true, content: [{ type: 'text', text: 'Error: no such file' }] })
    t.same(errorResult('Error: already prefixed').content, [{ type: 'text', text: 'Error: already prefixed' }])
    const long = (errorResult('x'.repeat(5000)).content[0] as { text: string }).text
    t.equal(long.length, MAX_TOOL_ERROR_CHARS)
    t.ok(long.endsWith('…'))
    const astral = (errorResult('😀'.repeat(1995)).content[0] as { text: string }).text
    t.equal(Array.from(astral).length, MAX_TOOL_ERROR_CHARS, 'counted in code points')
    t.notMatch(astral, /[\ud800-\udbff](?![\udc00-\udfff])/, 'no half surrogate pair')
    const fits = `${'a'.repeat(1992)}😀`
    t.equal((errorResult(fits).content[0] as { text: string }).text, `Error: ${fits}`, 'exactly 2,000 code points are kept whole')
  })
})

t.test('errors-catalogue', async t => {
/*
 * docs/errors.md is the catalogue of every error, held complete here as fastify's own test/errors.test.js
 * holds its Errors reference: every definition of every errors module is listed with its wire code and
 * status, nothing listed is gone, errors are defined nowhere else, and every wire code a route sends
 * without a definition is listed too. The handler is checked to answer each definition as listed.
 */

  const ROOT = fileURLToPath(new URL('../..', import.meta.url))
  const MODULES = ['core/errors.ts', ...readdirSync(join(ROOT, 'plugins')).sort()
    .map(name => `plugins/${name}/errors.ts`).filter(path => existsSync(join(ROOT, path)))]
  const DOC = readFileSync(join(ROOT, 'docs/errors.md'), 'utf8')

  async function loadDefinitions (): Promise<Map<string, ErrorDefinition>> {
    const found = new Map<string, ErrorDefinition>()
    for (const path of MODULES) {
      const mod = await import(join(ROOT, path)) as Record<string, unknown>
      for (const [name, value] of Object.entries(mod)) {
        if (!isErrorDefinition(value)) continue
        if (name !== value.code) throw new Error(`${path}: ${name} is defined as ${value.code} (a constructor is named as its code)`)
        found.set(name, value)
      }
    }
    return found
  }

  /** `| \`CODE\` | \`wire\` | 413 | …` rows of the catalogue. */
  const listed = new Map([...DOC.matchAll(/^\| `([A-Z][A-Z0-9_]+)` \| `([A-Za-z_]+)` \| (\d{3}) \|/gm)]
    .map(([, code, wire, status]) => [code as string, { wire: wire as string, status: Number(status) }]))
  /** `| \`wire\` | 404 | …` rows of the table of wire codes without a definition. */
  const plain = new Set([...DOC.matchAll(/^\| `([A-Za-z_]+)` \| (?:\d{3}|–) \|/gm)].map(([, wire]) => wire as string))

  function sources (dir: string): string[] {
    return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
      .filter(path => path.endsWith('.ts') && !path.includes('node_modules')).map(path => join(dir, path))
  }

  const definitions = await loadDefinitions()

  t.test('the catalogue was parsed', async t => {
    t.ok(definitions.size >= 60, `${definitions.size} definitions in ${MODULES.length} modules`)
    t.ok(listed.size >= 60, `${listed.size} rows`)
    t.ok(plain.size >= 5, `${plain.size} rows without a definition`)
  })

  t.test('every definition is in docs/errors.md with its wire code and status', async t => {
    for (const [code, def] of definitions) {
      t.same(listed.get(code), { wire: def.wire, status: def.statusCode }, `${code} is listed as ${def.wire}, ${def.statusCode}`)
    }
  })

  t.test('docs/errors.md lists no error that is not defined', async t => {
    for (const code of listed.keys()) t.ok(definitions.has(code), `${code} is defined in an errors module`)
  })

  t.test('errors are defined only in errors modules, and only with defineError', async t => {
    for (const path of [...sources('core'), ...sources('plugins')]) {
      const text = readFileSync(join(ROOT, path), 'utf8')
      if (path !== 'core/errors.ts') t.notMatch(text, /\bcreateError\(/, `${path} makes no error with createError`)
      if (!MODULES.includes(path)) t.notMatch(text, /\bdefineError\(/, `${path} defines no error`)
      if (path !== 'core/errors.ts') t.notMatch(text, /wireCode\b/, `${path} sets no wire code on an instance`)
    }
  })

  t.test('every wire code sent without a definition is listed', async t => {
    const sent = new Set<string>([...FRAMEWORK_WIRE.map(([, wire]) => wire), 'bad_request', 'Unauthorized'])
    for (const path of [...sources('core'), ...sources('plugins')]) {
      const text = readFileSync(join(ROOT, path), 'utf8')
      for (const [, wire] of text.matchAll(/\berror: '([A-Za-z_]+)'/g)) sent.add(wire as string)
    }
    t.ok(sent.has('access_denied') && sent.has('too_many_requests'), 'the scan finds route bodies')
    for (const wire of sent) t.ok(plain.has(wire), `${wire} is in the table without a definition`)
    for (const wire of plain) t.ok(sent.has(wire), `${wire}, listed without a definition, is still sent without one`)
  })

  t.test('the error handler answers each definition with its wire code and status', async t => {
    const app = Fastify({ logger: false })
    app.setErrorHandler(errorHandler)
    app.get('/:code', async request => {
      const Def = definitions.get((request.params as { code: string }).code)
      if (Def === undefined) throw new Error('unknown code')
      throw new Def('x', 1)
    })
    t.teardown(async () => await app.close())
    for (const [code, def] of definitions) {
      const res = await app.inject(`/${code}`)
      t.equal(res.statusCode, def.statusCode, `${code}: status`)
      t.equal(res.json().error, def.wire, `${code}: wire code`)
      if (def.statusCode >= 500) t.match(res.json().detail, /^internal error \(ref /, `${code}: a 5xx body has no detail`)
    }
    const internal = [...definitions.values()].filter(d => d.wire === INTERNAL_ERROR)
    t.ok(internal.every(d => d.statusCode >= 500), 'only 5xx answer internal_error')
  })
})

t.test('error-bodies', async t => {
/*
 * No error body gives away where or how the server keeps its data, or a secret (docs/errors.md): the
 * full manifest, with a data directory of its own and no Docker engine (an unreachable socket, so the
 * engine's own failure paths answer too), is driven through every error path reachable without a
 * sandbox, and every 4xx/5xx body is scanned for the data directory, its layout (`chats/<key>`), host
 * path prefixes and the configured secrets.
 */

  const LINK_KEY = 'link-signing-key-for-the-body-scan-0123456789'
  const dataDir = mkdtempSync(join(tmpdir(), 'cubicle-error-bodies-'))
  t.teardown(() => { rmSync(dataDir, { recursive: true, force: true }) })
  const CHAT = 'scan-chat'
  const paths = chatPaths(dataDir, CHAT)

  const auth = { authorization: `Bearer ${TEST_API_KEY}` }
  const BOUNDARY = 'scanboundary'
  const multipart = (field: string, content: string): InjectOptions => ({
    headers: { ...auth, 'content-type': `multipart/form-data; boundary=${BOUNDARY}` },
    payload: `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${field}"; filename="f.txt"\r\nContent-Type: text/plain\r\n\r\n${content}\r\n--${BOUNDARY}--\r\n`
  })
  // 256 distinct valid host rules of 253 characters (the longest name): within the body schema, over the stored override's 64 KiB.
  const longHost = (i: number): string => `${['a', 'b', 'c'].map(c => c.repeat(61)).join('.')}.${'d'.repeat(50)}.h${String(i).padStart(3, '0')}.example.com`

  /** Every request below must answer an error; its name says which path it drives. */
  const REQUESTS: Array<[string, InjectOptions]> = [
    ['no such route', { method: 'GET', url: '/no/such/route' }],
    ['method not allowed', { method: 'DELETE', url: '/health' }],
    ['missing credentials', { method: 'GET', url: `/api/egress/${CHAT}` }],
    ['wrong key', { method: 'GET', url: `/api/egress/${CHAT}`, headers: { authorization: 'Bearer not-the-key-0123456789-0123456789-0123' } }],
    ['bad capability token', { method: 'GET', url: `/api/egress/${CHAT}?t=forged.token.value` }],
    ['invalid chat id', { method: 'GET', url: '/api/egress/-bad..id', headers: auth }],
    ['invalid chat id for the prompt', { method: 'GET', url: '/system-prompt?chat_id=..%2F..%2Fetc', headers: auth }],
    ['schema violation', { method: 'PUT', url: `/api/egress/${CHAT}`, headers: auth, payload: { mode: 'sideways' } }],
    ['invalid JSON', { method: 'PUT', url: `/api/egress/${CHAT}`, headers: { ...auth, 'content-type': 'application/json' }, payload: '{"mode":' }],
    ['bad egress rule', { method: 'PUT', url: `/api/egress/${CHAT}`, headers: auth, payload: { mode: 'allowlist', allow: ['exa mple.com', '999.1.1.1/99'] } }],
    ['override too large once stored', { method: 'PUT', url: `/api/egress/${CHAT}`, headers: auth, payload: { mode: 'allowlist', allow: Array.from({ length: 256 }, (_, i) => longHost(i)) } }],
    ['upload not multipart', { method: 'POST', url: `/api/uploads/${CHAT}/a.txt`, headers: { ...auth, 'content-type': 'text/plain' }, payload: 'x' }],
    ['upload without a file field', { method: 'POST', url: `/api/uploads/${CHAT}/a.txt`, ...multipart('other', 'x') }],
    ['upload over the limit', { method: 'POST', url: `/api/uploads/${CHAT}/big.txt`, ...multipart('file', 'x'.repeat(4096)) }],
    ['upload with a traversal path', { method: 'POST', url: `/api/uploads/${CHAT}/..%2F..%2Fescape.txt`, ...multipart('file', 'x') }],
    ['upload onto a directory', { method: 'POST', url: `/api/uploads/${CHAT}/dir`, ...multipart('file', 'x') }],
    ['missing output file', { method: 'GET', url: `/files/${CHAT}/missing.txt`, headers: auth }],
    ['output path is a directory', { method: 'GET', url: `/files/${CHAT}/sub`, headers: auth }],
    ['range beyond the file', { method: 'GET', url: `/files/${CHAT}/out.txt`, headers: { ...auth, range: 'bytes=900-999' } }],
    ['browser without a sandbox', { method: 'GET', url: `/browser/${CHAT}/json`, headers: auth }],
    ['terminal status without an engine', { method: 'GET', url: `/terminal/${CHAT}/status`, headers: auth }],
    ['terminal restart without an engine', { method: 'POST', url: `/terminal/${CHAT}/restart-container`, headers: auth, payload: {} }],
    ['a state file in the way (a 5xx from the file system)', { method: 'PUT', url: '/api/egress/odd-chat', headers: auth, payload: { mode: 'off' } }],
    ['terminal bad pid', { method: 'POST', url: `/terminal/${CHAT}/processes/1/kill`, headers: auth, payload: {} }],
    ['terminal socket over plain HTTP', { method: 'GET', url: `/terminal/${CHAT}/ws`, headers: auth }],
    ['MCP stream without Accept', { method: 'GET', url: '/mcp', headers: auth }],
    ['MCP resumption', { method: 'GET', url: '/mcp', headers: { ...auth, accept: 'text/event-stream', 'last-event-id': '1' } }],
    ['MCP without credentials', { method: 'POST', url: '/mcp', payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' } }],
    ['MCP from a foreign origin', { method: 'POST', url: '/mcp', headers: { ...auth, origin: 'https://evil.example' }, payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' } }]
  ]

  /** Injects each request and checks that it fails and that neither body nor headers show a forbidden text. */
  async function scan (t: Test, app: FastifyInstance, requests: Array<[string, InjectOptions]>, more: Array<[string, string]>): Promise<Map<string, LightMyRequestResponse>> {
    const forbidden: Array<[string, string]> = [
      ['the data directory', dataDir], ['the data directory (real path)', realpathSync(dataDir)], ['the layout', 'chats/'],
      ['a host path', '/var/'], ['a host path', '/tmp/'], ['the API key', TEST_API_KEY], ['the link signing key', LINK_KEY], ...more
    ]
    const answers = new Map<string, LightMyRequestResponse>()
    for (const [name, request] of requests) {
      const res = await app.inject(request)
      answers.set(name, res)
      t.ok(res.statusCode >= 400, `${name}: answers an error (${res.statusCode} ${res.body.slice(0, 120)})`)
      for (const [what, text] of forbidden) t.notOk(res.body.includes(text), `${name}: the body does not show ${what}`)
      for (const [header, value] of Object.entries(res.headers)) {
        for (const [what, text] of forbidden) t.notOk(String(value).includes(text), `${name}: header ${header} does not show ${what}`)
      }
    }
    return answers
  }

  t.test('no 4xx/5xx body names the data directory, its layout, a host path or a secret', async t => {
    const app = await build(t, {
      MCP_API_KEY: TEST_API_KEY,
      LINK_SIGNING_KEY: LINK_KEY,
      DATA_DIR: dataDir,
      DOCKER_HOST: 'unix:///nonexistent/docker.sock',
      SANDBOX_PREFIX: 'errscan',
      UPLOAD_MAX_BYTES: '1024'
    })
    // Layout the routes find on disk: an uploads directory where a file is uploaded, an output file and directory.
    mkdirSync(join(paths.uploads, 'dir', 'inner'), { recursive: true })
    mkdirSync(join(paths.outputs, 'sub'), { recursive: true })
    writeFileSync(join(paths.outputs, 'out.txt'), 'hello')
    // A directory where a chat's egress.json belongs: the rename onto it fails with a message naming host paths.
    mkdirSync(join(chatPaths(dataDir, 'odd-chat').dir, 'egress.json', 'inner'), { recursive: true })

    const answers = await scan(t, app, REQUESTS, [['the chat key', paths.key], ['the other chat key', chatPaths(dataDir, 'odd-chat').key]])
    // The scan covered what it claims: the paths above answered what they are meant to.
    const errorOf = (name: string): unknown => JSON.parse(answers.get(name)?.body ?? '{}').error
    t.equal(errorOf('override too large once stored'), 'storage_too_large')
    t.equal(answers.get('override too large once stored')?.statusCode, 413)
    t.equal(errorOf('bad egress rule'), 'bad_rule')
    t.equal(errorOf('upload over the limit'), 'payload_too_large')
    t.equal(errorOf('upload onto a directory'), 'target_is_directory')
    t.equal(errorOf('range beyond the file'), 'range_not_satisfiable')
    t.equal(errorOf('a state file in the way (a 5xx from the file system)'), 'internal_error')
    const statuses = new Set([...answers.values()].map(res => res.statusCode))
    t.ok(statuses.size >= 10, `distinct statuses: ${[...statuses].sort().join(', ')}`)
    t.ok([...statuses].some(status => status >= 500), 'a 5xx is among them')
  })

  t.test('the OAuth server\'s error answers show no secret or data path either', async t => {
    const app = await build(t, {
      MCP_API_KEY: TEST_API_KEY,
      LINK_SIGNING_KEY: LINK_KEY,
      DATA_DIR: join(dataDir, 'oauth'),
      DOCKER_HOST: 'unix:///nonexistent/docker.sock',
      SANDBOX_PREFIX: 'errscan2',
      OAUTH_ENABLED: 'true',
      PUBLIC_BASE_URL: 'https://cubicle.example'
    })
    const answers = await scan(t, app, [
      ['unknown OAuth user', { method: 'DELETE', url: '/oauth/users/nobody', headers: auth }],
      ['unknown interaction', { method: 'GET', url: '/oauth/interaction/no-such-uid' }],
      ['token request of an unknown client', { method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'grant_type=authorization_code&code=x&client_id=nobody' }],
      ['/mcp with a forged token', { method: 'POST', url: '/mcp', headers: { authorization: 'Bearer forged.jwt.token' }, payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' } }]
    ], [])
    t.equal(JSON.parse(answers.get('unknown OAuth user')?.body ?? '{}').error, 'unknown_user')
  })
})

/*
 * What the server's own logger configuration lets into the log (SECURITY.md "Identity and
 * credentials"): a request line carries the method, the redacted URL, the request id and the client
 * address, never a header, so no credential header reaches the log on any outcome (200, 401, 404, 429,
 * 500); `token` and `apiKey` fields of logged objects are censored. Tokens in URLs: test/core/auth.test.ts (group tokens).
 */
t.test('log-redaction', async t => {
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
})
