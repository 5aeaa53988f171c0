import t from 'tap'
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'
import { entry } from '../../core/app.js'
import { entries } from '../../fastify.config.js'
import { listen, TEST_API_KEY } from '../helper.js'
import { connect, probePlugin, textOf, type Probe } from '../fixtures/mcp-probe.js'
import { dockerOrSkip, removeByPrefix } from './docker.js'
import { bash } from '../plugins/workspace-tools/integration-app.js'

const AUTH = { Authorization: `Bearer ${TEST_API_KEY}` }

/** The value of one sample (`name{labels} value`), or undefined when the line is absent. */
function sample (text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue
    const open = line.indexOf('{')
    const labelText = open === name.length ? line.slice(open + 1, line.indexOf('}')) : ''
    if (Object.entries(labels).every(([k, v]) => labelText.split(',').includes(`${k}="${v}"`))) {
      return Number(line.slice(line.lastIndexOf(' ') + 1))
    }
  }
  return undefined
}

async function scrape (t: Test, url: string, headers: Record<string, string> = AUTH): Promise<string> {
  const res = await fetch(`${url}/metrics`, { headers })
  t.equal(res.status, 200, 'GET /metrics answers 200')
  t.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/)
  return await res.text()
}

// /metrics — requests per route, tool calls per tool and outcome, auth failures, bytes; bearer-protected
t.test('/metrics counts HTTP requests, tool calls by outcome and auth failures, with no chat id or token in a label', async t => {
  const probe: Probe = { calls: [], aborted: [] }
  const { url } = await listen(t, { MCP_API_KEY: TEST_API_KEY, DOCKER_HOST: 'unix:///nonexistent.sock' },
    config => [...entries(config, ['metrics', 'mcp-transport', 'docs']), entry(probePlugin(probe), {})])

  const refused = await fetch(`${url}/metrics`)
  t.equal(refused.status, 401, 'protected mode: no key, no metrics')
  t.equal((await fetch(`${url}/metrics`, { headers: { Authorization: 'Bearer wrong-key-wrong-key-wrong-key-000' } })).status, 401)

  const client = await connect(t, url, { ...AUTH, 'X-Chat-Id': 'secret-chat-4711' })
  t.equal(textOf(await client.callTool({ name: 'whoami', arguments: {} })).includes('secret-chat-4711'), true)
  await client.callTool({ name: 'whoami', arguments: { n: 2 } })
  t.equal((await client.callTool({ name: 'boom', arguments: {} })).isError, true)
  t.equal((await client.callTool({ name: 'whoami', arguments: { n: 'many' } })).isError, true, 'bad arguments are refused')
  await fetch(`${url}/no/such/route?t=token-abcdef-123456`)

  const text = await scrape(t, url)
  t.equal(sample(text, 'cubicle_tool_calls_total', { tool: 'whoami', outcome: 'ok' }), 2)
  t.equal(sample(text, 'cubicle_tool_calls_total', { tool: 'boom', outcome: 'error' }), 1)
  t.equal(sample(text, 'cubicle_tool_calls_total', { tool: 'whoami', outcome: 'rejected' }), 1)
  t.equal(sample(text, 'cubicle_tool_call_duration_seconds_count', { tool: 'whoami' }), 3)
  t.equal(sample(text, 'cubicle_auth_failures_total', { route: '/metrics', status: '401' }), 2)
  t.ok((sample(text, 'cubicle_http_requests_total', { method: 'POST', route: '/mcp', status: '200' }) ?? 0) >= 5, 'MCP posts are counted')
  t.equal(sample(text, 'cubicle_http_requests_total', { method: 'GET', route: '(unmatched)', status: '404' }), 1)
  t.ok((sample(text, 'cubicle_http_response_bytes_total', { route: '/mcp' }) ?? 0) > 500, 'bytes served on /mcp')
  t.ok((sample(text, 'cubicle_http_request_duration_seconds_count', { method: 'POST', route: '/mcp' }) ?? 0) >= 5)
  t.ok(sample(text, 'cubicle_process_resident_memory_bytes') !== undefined, 'process metrics are on by default')
  t.notMatch(text, 'secret-chat-4711', 'no chat id in any label')
  t.notMatch(text, 'token-abcdef', 'no URL or token in any label')
  t.notMatch(text, TEST_API_KEY)

  const again = await scrape(t, url)
  t.equal(sample(again, 'cubicle_http_requests_total', { method: 'GET', route: '/metrics', status: '200' }), 1, 'the previous scrape is counted')
  t.ok((sample(again, 'cubicle_http_response_bytes_total', { route: '/metrics' }) ?? 0) > text.length, 'its bytes (headers and body) too')
})

t.test('open mode: /metrics needs no key; the connection page links it and the OpenAPI description', async t => {
  const { url } = await listen(t, { DOCKER_HOST: 'unix:///nonexistent.sock' }, config => entries(config, ['metrics', 'mcp-transport', 'docs']))
  const text = await scrape(t, url, {})
  t.match(text, /# TYPE cubicle_tool_calls_total counter/)
  const page = await (await fetch(`${url}/`)).text()
  t.match(page, /<a href="\/openapi\.json">/)
  t.match(page, /GET \/metrics/)
})

// an OpenAPI description generated from the route schemas, at /openapi.json
t.test('GET /openapi.json describes the routes of the full manifest from their schemas', async t => {
  const { url } = await listen(t, { MCP_API_KEY: TEST_API_KEY, DOCKER_HOST: 'unix:///nonexistent.sock' })
  const res = await fetch(`${url}/openapi.json`)
  t.equal(res.status, 200, 'public: it describes routes, not data')
  t.match(res.headers.get('content-type'), /^application\/json/)
  const spec = await res.json() as { openapi: string, info: { title: string, version: string }, servers: Array<{ url: string }>, paths: Record<string, Record<string, { tags?: string[], responses?: object }>> }
  t.equal(spec.openapi, '3.1.0')
  t.equal(spec.info.title, 'Cubicle')
  t.same(spec.servers, [{ url: 'http://cubicle.test' }])
  for (const path of ['/health', '/ready', '/metrics', '/mcp', '/']) t.ok(spec.paths[path] !== undefined, `${path} is described`)
  t.ok(Object.keys(spec.paths).some(p => p.startsWith('/files/')), 'the files routes are described')
  t.notOk(spec.paths['/openapi.json'], 'the description itself is hidden')
  // The app proxy (/apps/…) forwards every method to the app in the sandbox, OPTIONS included: that one is the app's.
  for (const [path, ops] of Object.entries(spec.paths)) if (!path.startsWith('/apps/')) t.notOk('options' in ops, `${path}: no preflight operation`)
  t.match(spec.paths['/health']?.get, { tags: ['operations'], responses: { 200: { content: { 'application/json': { schema: { properties: { status: {} } } } } } } })
  t.match(spec.paths['/ready']?.get?.responses, { 200: {}, 503: {} })
  const health = await fetch(`${url}/health`)
  t.same(await health.json(), { status: 'healthy' }, 'the response schema does not change the answer')
})

const gate = await dockerOrSkip()

// tool calls per tool, sandboxes by state, exec latency on a real sandbox
t.test('bash_tool on real Docker: a tool call, a sandbox start, a running sandbox; a stop moves it to stopped', gate, async t => {
  const prefix = `t-${randomBytes(4).toString('hex')}`
  const dataDir = await mkdtemp(join(tmpdir(), 'metrics-data-'))
  t.teardown(async () => { await removeByPrefix(prefix); await rm(dataDir, { recursive: true, force: true }) })
  const { app, url } = await listen(t, { SANDBOX_PREFIX: prefix, DATA_DIR: dataDir, MAX_RUNNING_SANDBOXES: '7' },
    config => entries(config, ['chat-storage', 'metrics', 'mcp-transport', 'capabilities', 'sandbox-docker', 'sandbox', 'workspace-tools']))
  const client = await connect(t, url, { 'X-Chat-Id': 'metrics-chat' })
  t.equal(textOf(await bash(client, 'echo hi')), 'hi\n')
  t.equal(textOf(await bash(client, 'exit 3')), '[Exit code: 3]')

  let text = await scrape(t, url, {})
  t.equal(sample(text, 'cubicle_tool_calls_total', { tool: 'bash_tool', outcome: 'ok' }), 2, 'a non-zero exit is still a finished call')
  t.equal(sample(text, 'cubicle_tool_call_duration_seconds_count', { tool: 'bash_tool' }), 2)
  t.equal(sample(text, 'cubicle_sandbox_starts_total'), 1)
  t.equal(sample(text, 'cubicle_sandboxes', { state: 'running' }), 1)
  t.equal(sample(text, 'cubicle_sandbox_capacity'), 7)

  await app.sandbox.stop('metrics-chat')
  text = await scrape(t, url, {})
  t.equal(sample(text, 'cubicle_sandboxes', { state: 'running' }), 0)
  t.equal(sample(text, 'cubicle_sandboxes', { state: 'stopped' }), 1)
  t.equal(sample(text, 'cubicle_sandbox_stops_total', { reason: 'stopped' }), 1)
  t.notMatch(text, 'metrics-chat')
})
