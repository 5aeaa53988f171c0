import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify'
import t, { type Test } from 'tap'
import { chatPaths } from '../../core/chat-paths.js'
import { build, TEST_API_KEY } from '../helper.js'

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
