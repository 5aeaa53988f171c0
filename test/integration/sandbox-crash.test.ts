/*
 * kill -9 of the real server process in the middle of a bash_tool call: no workspace data
 * is lost, and the restarted server re-adopts the sandbox (one container, the same one, the command
 * started before the crash still running) and the next call works. Spawns `node --import tsx
 * core/server.ts` with its environment, as an operator would run it, and talks MCP over HTTP.
 */
import t from 'tap'
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { chatKey } from '../../core/chat-id.js'
import { connect } from '../fixtures/mcp-probe.js'
import { pollUntil } from '../fixtures/poll.js'
import { bash, textOf } from '../plugins/workspace-tools/integration-app.js'
import { containersOfChat, DOCKER_HOST, dockerOrSkip, removeByPrefix, TEST_IMAGE } from './docker.js'

const gate = await dockerOrSkip()
const root = fileURLToPath(new URL('../..', import.meta.url))
const sleep = async (ms: number): Promise<void> => await new Promise(resolve => setTimeout(resolve, ms))

interface Server { child: ChildProcess, url: string, log: () => string }

/** Starts the server and resolves once it listens (its URL from the log line). */
async function start (env: Record<string, string>): Promise<Server> {
  const child = spawn(process.execPath, ['--import=tsx', 'core/server.ts'], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let out = ''
  child.stdout?.on('data', c => { out += String(c) })
  child.stderr?.on('data', c => { out += String(c) })
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not listen within 90 s:\n${out}`)), 90_000)
    const check = (): void => {
      const m = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(out)
      if (m !== null) { clearTimeout(timer); resolve(m[1] as string) }
    }
    child.stdout?.on('data', check)
    child.on('exit', code => { clearTimeout(timer); reject(new Error(`server exited with ${String(code)}:\n${out}`)) })
  })
  return { child, url, log: () => out }
}

async function stop (server: Server, signal: NodeJS.Signals): Promise<void> {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return
  const exited = new Promise(resolve => server.child.once('exit', resolve))
  server.child.kill(signal)
  await exited
}

t.test('kill -9 of the server mid-bash_tool loses no data; the restarted server re-adopts the sandbox', gate, async t => {
  const prefix = `tcrash-${randomBytes(3).toString('hex')}`
  const dataDir = await mkdtemp(join(tmpdir(), 'crash-data-'))
  t.teardown(async () => {
    await removeByPrefix(prefix)
    await rm(dataDir, { recursive: true, force: true })
  })
  const env = { DATA_DIR: dataDir, DOCKER_HOST, DOCKER_IMAGE: TEST_IMAGE, SANDBOX_PREFIX: prefix, PUBLIC_BASE_URL: 'http://cubicle.test', SANDBOX_POOL_SIZE: '0' }
  const chat = 'crash-1'
  const key = chatKey(chat)

  const first = await start(env)
  t.teardown(async () => { await stop(first, 'SIGKILL') })
  const a = await connect(t, first.url, { 'X-Chat-Id': chat })
  t.match(textOf(await bash(a, 'echo before > ~/before.txt && echo out > /mnt/user-data/outputs/before.txt && echo ok')), /^ok\n/)
  const [sandbox] = await containersOfChat(prefix, key)
  // The client sees the call's stream break when the server dies: the SDK reports it through onerror
  // and leaves the call waiting for its request timeout (60 s by default), which the test does not sit out.
  const transportErrors: string[] = []
  a.onerror = err => { transportErrors.push(String(err)) }
  const abandon = new AbortController()
  const pending = a.callTool({ name: 'bash_tool', arguments: { command: 'echo during > ~/during.txt && sync && sleep 600; echo after > ~/after.txt', description: 'test' } },
    undefined, { signal: abandon.signal, timeout: 600_000 }).then(() => 'answered', () => 'no answer')
  // `sync` may take long on a busy Docker host: asked until the call got to its sleep, at most 60 s.
  const seen = await pollUntil(async () => textOf(await bash(a, 'test -f ~/during.txt && pgrep -f "^sleep 600$" >/dev/null && echo yes || echo no')), s => s === 'yes\n', 60_000, 250)
  t.equal(seen, 'yes\n', 'the call is running in the sandbox')
  await stop(first, 'SIGKILL')
  t.equal(first.child.signalCode, 'SIGKILL')
  for (let i = 0; i < 120 && !transportErrors.some(e => e.includes('SSE stream disconnected')); i++) await sleep(250)
  t.match(transportErrors.join('\n'), /SSE stream disconnected/, 'the client saw the server die mid-call')
  abandon.abort()
  t.equal(await pending, 'no answer', 'the call got no result')

  const second = await start(env)
  t.teardown(async () => { await stop(second, 'SIGTERM') })
  t.match(second.log(), /re-adopted sandboxes/)
  t.match(second.log(), /"containers":1,"running":1/, 'the boot re-adopted the running sandbox')
  const b = await connect(t, second.url, { 'X-Chat-Id': chat })
  const r = await bash(b, 'cat ~/before.txt ~/during.txt /mnt/user-data/outputs/before.txt; pgrep -cf "^sleep 600$"')
  t.notOk(r.isError)
  t.equal(textOf(r), 'before\nduring\nout\n1\n', 'no data lost; the command started before the crash still runs (no restart)')
  const after = await containersOfChat(prefix, key)
  t.equal(after.length, 1, 'one container')
  t.equal(after[0]?.id, sandbox?.id, 'the same container, adopted, not recreated')
  t.ok(after[0]?.running)
  const meta = JSON.parse(await readFile(join(dataDir, 'chats', key, 'meta.json'), 'utf8')) as { chat_id?: string }
  t.equal(meta.chat_id, chat, 'meta.json intact')
})
