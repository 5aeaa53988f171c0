import t, { type Test } from 'tap'
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import fp from 'fastify-plugin'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { entry } from '../../core/app.js'
import type { ToolCallEvent } from '../../plugins/mcp-transport/types.js'
import { listen } from '../helper.js'
import { connect, kernelManifest, textOf, type Probe } from '../fixtures/mcp-probe.js'
import { pollUntil } from '../fixtures/poll.js'
import { dockerOrSkip, removeByPrefix, testDockerClient, TEST_IMAGE } from './docker.js'

const root = fileURLToPath(new URL('../..', import.meta.url))

/** The kernel app (transport + probe tools) plus an observer that records how every call ended. */
async function kernel (t: Test, env: Record<string, string>): Promise<{ app: Awaited<ReturnType<typeof listen>>['app'], url: string, probe: Probe, events: ToolCallEvent[] }> {
  const probe: Probe = { calls: [], aborted: [] }
  const events: ToolCallEvent[] = []
  const observer = fp(async fastify => { fastify.mcp.onToolCall(e => events.push(e)) }, { name: 'observer', dependencies: ['mcp-transport'] })
  const { app, url } = await listen(t, { DOCKER_HOST: 'unix:///nonexistent.sock', ...env }, config => [...kernelManifest(probe)(config), entry(observer, {})])
  return { app, url, probe, events }
}

async function until (what: () => boolean, ms = 20000): Promise<void> {
  const end = Date.now() + ms
  while (!what()) {
    if (Date.now() > end) throw new Error('condition not met in time')
    await new Promise(resolve => setTimeout(resolve, 20))
  }
}

// graceful shutdown — in-flight tool calls finish or are cancelled cleanly within a bound
t.test('app.close() lets a running tool call finish within the drain time', async t => {
  // CLOSE_GRACE_MS 6000: calls get 2000 ms to finish, then up to 3000 ms to stop.
  const { app, url, probe, events } = await kernel(t, { CLOSE_GRACE_MS: '6000' })
  const client = await connect(t, url, { 'X-Chat-Id': 'drain-ok' })
  const call = client.callTool({ name: 'slow', arguments: { ms: 600 } }) as Promise<CallToolResult>
  await until(() => probe.calls.length === 1)
  await app.close()
  const result = await call
  t.equal(textOf(result), 'done', 'the call finished and its answer reached the client')
  t.notOk(result.isError)
  t.same(probe.aborted, [], 'the tool was not cancelled')
  t.match(events, [{ tool: 'slow', outcome: 'ok' }])
})

t.test('app.close() stops a call that outlives the drain time and answers it with a clear error, within the bound', async t => {
  const { app, url, probe, events } = await kernel(t, { CLOSE_GRACE_MS: '5000' })
  const client = await connect(t, url, { 'X-Chat-Id': 'drain-stop' })
  const call = client.callTool({ name: 'slow', arguments: { ms: 120000 } }) as Promise<CallToolResult>
  await until(() => probe.calls.length === 1)
  const t0 = Date.now()
  await app.close()
  const closeMs = Date.now() - t0
  const result = await call
  t.equal(result.isError, true)
  t.match(textOf(result), /server is shutting down .* stopped this call .* sandbox keeps running; run the call again/)
  t.same(probe.aborted, ['drain-stop'], 'the tool saw its abort signal')
  t.ok(closeMs >= 900 && closeMs < 4000, `close took ${closeMs} ms: the 1000 ms drain, then the stop`)
  t.match(events, [{ tool: 'slow', outcome: 'shutdown' }])
})

t.test('a request that arrives while the server drains is answered 503 and never runs', async t => {
  const { app, url, probe } = await kernel(t, { CLOSE_GRACE_MS: '6000' })
  const client = await connect(t, url, { 'X-Chat-Id': 'drain-late' })
  const first = client.callTool({ name: 'slow', arguments: { ms: 1200 } }) as Promise<CallToolResult>
  await until(() => probe.calls.length === 1)
  const closing = app.close()
  await new Promise(resolve => setTimeout(resolve, 100))
  // Same keep-alive connection: Fastify answers 503 to new requests while closing.
  const late = await (client.callTool({ name: 'whoami', arguments: {} }) as Promise<CallToolResult>).then(r => textOf(r), (err: Error) => err.message)
  t.match(late, /503/)
  t.equal(probe.calls.filter(c => c.name === 'whoami').length, 0, 'the late call never ran')
  t.equal(textOf(await first), 'done')
  await closing
})

/** Starts `core/server.ts` as a real process; resolves once it listens, with its URL. */
async function startServer (env: Record<string, string>): Promise<{ child: ChildProcess, url: string, exited: Promise<{ code: number | null, ms: number, out: string }>, signal: (s: NodeJS.Signals) => number }> {
  const child = spawn(process.execPath, ['--import=tsx', 'core/server.ts'], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', ...env }
  })
  let out = ''
  let signalledAt = 0
  const exited = new Promise<{ code: number | null, ms: number, out: string }>(resolve => {
    child.on('close', code => resolve({ code, ms: Date.now() - signalledAt, out }))
  })
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not listen:\n${out}`)), 90000)
    const onData = (chunk: Buffer): void => {
      out += String(chunk)
      const m = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(out)
      if (m?.[1] !== undefined) { clearTimeout(timer); resolve(m[1]) }
    }
    child.stdout.on('data', onData)
    child.stderr.on('data', onData)
    child.on('close', () => reject(new Error(`server exited before listening:\n${out}`)))
  })
  return { child, url, exited, signal: s => { signalledAt = Date.now(); child.kill(s); return signalledAt } }
}

const gate = await dockerOrSkip()

t.test('SIGTERM on the real server with a real sandbox: a long bash_tool call is stopped cleanly, the process exits 0 in the bound, the sandbox keeps running', gate, async t => {
  const prefix = `t-${randomBytes(4).toString('hex')}`
  const dataDir = await mkdtemp(join(tmpdir(), 'shutdown-data-'))
  t.teardown(async () => { await removeByPrefix(prefix); await rm(dataDir, { recursive: true, force: true }) })
  const server = await startServer({ DOCKER_IMAGE: TEST_IMAGE, SANDBOX_PREFIX: prefix, DATA_DIR: dataDir, CLOSE_GRACE_MS: '8000', SANDBOX_POOL_SIZE: '0' })
  t.teardown(() => { server.child.kill('SIGKILL') })
  const client = await connect(t, server.url, { 'X-Chat-Id': 'shutdown-chat' })
  const bash = async (command: string): Promise<CallToolResult> => await client.callTool({ name: 'bash_tool', arguments: { command, description: 'test' } }) as CallToolResult
  t.equal(textOf(await bash('echo ok')), 'ok\n', 'the sandbox runs')

  const long = bash('echo started; sleep 300; echo never')
  // SIGTERM once the call runs in the sandbox (asked through a second call, at most 60 s), not after a guess.
  t.equal(await pollUntil(async () => textOf(await bash('pgrep -f "^sleep 300$" >/dev/null && echo running || echo not-yet')), s => s === 'running\n', 60_000, 200),
    'running\n', 'the long call runs')
  server.signal('SIGTERM')
  const result = await long
  t.equal(result.isError, true)
  t.match(textOf(result), /server is shutting down/)
  const { code, ms, out } = await server.exited
  t.equal(code, 0, 'clean exit')
  t.ok(ms < 8000, `exited ${ms} ms after SIGTERM, inside CLOSE_GRACE_MS`)
  t.match(out, /closing: running tool calls finish or are stopped/)
  t.match(out, /"msg":"closed"/)

  const docker = testDockerClient()
  try {
    const containers = await docker.list([`cu.prefix=${prefix}`])
    t.equal(containers.length, 1)
    t.equal(containers[0]?.running, true, 'the sandbox keeps running for the next boot to adopt')
  } finally { docker.close() }
})
