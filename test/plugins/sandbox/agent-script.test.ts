/*
 * cubicle-agent.py itself (the script, run by the host's python3: no Docker needed), driven over
 * its framed stdin/stdout by a server that reads slowly, as a loaded server or another call's flood
 * on the same stream makes it (docs/contract.md#in-sandbox-agent). Output a process wrote before it exited must arrive
 * whole, while a background child that floods after the exit still ends the request soon.
 */
import t from 'tap'
import { spawn, spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { createServer, type AddressInfo, type Server } from 'node:net'
import { decodeJson, encodeJson, FrameParser, parseExit, T_DATA, T_EXEC, T_EXIT, T_FAIL, T_FILE, T_HELLO, T_OUT, T_RESULT, T_SPAWNED } from '../../../plugins/sandbox/agent-protocol.js'
import { parseListening } from '../../../plugins/sandbox/agent-files.js'

const SCRIPT = fileURLToPath(new URL('../../../sandbox-image/agent/cubicle-agent.py', import.meta.url))
const python = spawnSync('python3', ['-c', 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)']).status === 0
const skip = python ? false : 'python3 ≥ 3.9 is missing on this host'
if (skip !== false) console.error(`# SKIP agent-script.test.ts: ${skip}`)

interface Agent {
  exec: (id: number, command: string) => void
  /** resolves with the request's output once its EXIT arrived, and the ms it took */
  done: (id: number) => Promise<{ out: Buffer, ms: number }>
  close: () => void
}

/**
 * The agent with a reader that pauses `slowMs` after each frame of the requests in `slow`. -B: no
 * __pycache__ in sandbox-image/agent (it would change the image's build hash; in the image the
 * directory is root's and the agent cannot write there anyway).
 */
function startAgent (slow: Set<number>, slowMs: number): Agent {
  const child = spawn('python3', ['-I', '-S', '-B', SCRIPT], { stdio: ['pipe', 'pipe', 'inherit'] })
  const out = new Map<number, Buffer[]>()
  const started = new Map<number, number>()
  const waiters = new Map<number, (r: { out: Buffer, ms: number }) => void>()
  const parser = new FrameParser((id, type, payload) => {
    if (type === T_HELLO) return
    if (type === T_OUT) {
      out.get(id)?.push(Buffer.from(payload))
      if (slow.has(id)) { child.stdout.pause(); setTimeout(() => { child.stdout.resume() }, slowMs) }
      return
    }
    if (type === T_EXIT) {
      parseExit(payload)
      waiters.get(id)?.({ out: Buffer.concat(out.get(id) ?? []), ms: performance.now() - (started.get(id) ?? 0) })
    }
  }, reason => { throw new Error(`protocol: ${reason}`) })
  child.stdout.on('data', (c: Buffer) => { parser.push(c) })
  return {
    exec: (id, command) => {
      out.set(id, [])
      started.set(id, performance.now())
      child.stdin.write(encodeJson(id, T_EXEC, { argv: ['bash', '-c', command], cwd: '/', env: {}, merged: true, stdin: false }))
    },
    done: async id => await new Promise(resolve => { waiters.set(id, resolve) }),
    close: () => { child.stdin.end(); child.kill() }
  }
}

t.test('output written before the exit is not dropped while the stream is slow', { skip }, async t => {
  // docs/contract.md#in-sandbox-agent: the quiet rule (200 ms) used to fire while a pump waited for the stream behind a
  // flood: 'seq 5000' next to it came back empty and the flood's tail was cut.
  const agent = startAgent(new Set([1]), 300)
  t.teardown(agent.close)
  agent.exec(1, "head -c 3000000 /dev/zero | tr '\\0' x")
  await new Promise(resolve => setTimeout(resolve, 300))
  agent.exec(2, 'sleep 0.3; seq 5000')
  const [flood, small] = await Promise.all([agent.done(1), agent.done(2)])
  t.equal(small.out.toString().split('\n').length - 1, 5000, 'every line of the small command')
  t.equal(small.out.toString().split('\n')[4999], '5000', 'in order')
  t.equal(flood.out.length, 3_000_000, 'the whole flood')
})

t.test('a background child flooding after the exit still ends the request soon, slow stream or not', { skip }, async t => {
  for (const slowMs of [0, 100]) {
    const agent = startAgent(new Set([1]), slowMs)
    // `yes` dies of SIGPIPE when the agent exits (close), `timeout` bounds it anyway.
    agent.exec(1, 'timeout 20 yes & echo hi')
    const r = await agent.done(1)
    agent.close()
    t.ok(r.out.includes('hi\n'), `output kept (slow ${slowMs} ms)`)
    t.ok(r.ms < 6000, `returned in ${r.ms.toFixed(0)} ms (slow ${slowMs} ms)`)
  }
})

t.test('the agent hardens itself before it imports anything but what hardening needs', { skip }, async t => {
  // The launcher's statements up to the prctl(PR_SET_DUMPABLE) import only os and sys (built into the
  // interpreter), and the prctl's block only ctypes (the interpreter the server uses makes the process
  // non-dumpable even before: sandbox-agent-hardening).
  const check = `
import ast, sys
tree = ast.parse(open(sys.argv[1]).read())
seen = []
for node in tree.body:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        seen += [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
    elif 'prctl' in ast.dump(node):
        inner = [a.name for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names]
        print(','.join(seen) + '|' + ','.join(inner)); break
`
  const r = spawnSync('python3', ['-I', '-S', '-c', check, SCRIPT], { encoding: 'utf8' })
  t.equal(r.stdout.trim(), 'os,sys|ctypes', 'imports before the prctl, and in its block')
  const run = spawnSync('python3', ['-I', '-S', '-B', SCRIPT], { input: '', encoding: 'utf8', timeout: 10_000 })
  t.equal(run.status, 0, 'starts, says hello and exits when stdin ends')
})

t.test('the agent\'s start imports only what its first command needs', { skip }, async t => {
  // The start is on a new chat's first call (docs/performance.md): no ssl (asyncio's TLS), no hash (only a
  // resumed handshake needs one), no file operations or TCP connections until one is asked for.
  const run = spawnSync('python3', ['-I', '-S', '-B', '-X', 'importtime', SCRIPT], { input: '', encoding: 'utf8', timeout: 10_000 })
  t.equal(run.status, 0, 'starts, says hello and exits when stdin ends')
  const imported = new Set(run.stderr.split('\n').map(l => /^import time:.*\| +(\S+)$/.exec(l)?.[1]).filter(m => m !== undefined))
  t.ok(imported.has('asyncio') && imported.has('cubicle_agent') && imported.has('subprocess'), 'the agent and what it runs on')
  // (an import of ssl stopped by the launcher still prints its line: _ssl, which only ssl imports, is the sign)
  t.same(['_ssl', 'hashlib', 'hmac', 'cubicle_files', 'cubicle_connect', 'cubicle_socket', 'cubicle_egress'].filter(m => imported.has(m)), [], 'nothing else')
})

t.test('the agent offers SPAWNED and sends it once the process exists, before its output; a process that cannot start gets FAIL only', { skip }, async t => { // docs/engine.md#the-agent-socket
  const child = spawn('python3', ['-I', '-S', '-B', SCRIPT], { stdio: ['pipe', 'pipe', 'inherit'] })
  t.teardown(() => { child.stdin.end(); child.kill() })
  const frames: Array<[number, number]> = []
  let hello: Record<string, unknown> = {}
  const ended = new Set<number>()
  let wake = (): void => {}
  const parser = new FrameParser((id, type, payload) => {
    if (type === T_HELLO) { hello = decodeJson(payload); return }
    frames.push([id, type])
    if (type === T_EXIT || type === T_FAIL) { ended.add(id); wake() }
  }, reason => { throw new Error(`protocol: ${reason}`) })
  child.stdout.on('data', (c: Buffer) => { parser.push(c) })
  child.stdin.write(encodeJson(1, T_EXEC, { argv: ['sh', '-c', 'echo hi'], cwd: '/', env: {}, merged: true, stdin: false }))
  child.stdin.write(encodeJson(2, T_EXEC, { argv: ['/nonexistent/program'], cwd: '/', env: {}, merged: false, stdin: false }))
  while (!ended.has(1) || !ended.has(2)) await new Promise<void>(resolve => { wake = resolve })
  t.equal(hello.spawned, true, 'HELLO offers SPAWNED')
  t.same([hello.uid, hello.gid], [process.getuid?.(), process.getgid?.()], 'and says the ids it runs commands as (the ready probe needs no `id`)')
  t.same(frames.filter(f => f[0] === 1).map(f => f[1]), [T_SPAWNED, T_OUT, T_EXIT], 'SPAWNED, the output, the exit')
  t.same(frames.filter(f => f[0] === 2).map(f => f[1]), [T_FAIL], 'nothing started: FAIL, no SPAWNED')
})

/** One FILE request to a fresh agent: its DATA and RESULT. */
async function fileOp (req: Record<string, unknown>): Promise<{ result: Record<string, unknown>, data: Buffer }> {
  const child = spawn('python3', ['-I', '-S', '-B', SCRIPT], { stdio: ['pipe', 'pipe', 'inherit'] })
  try {
    return await new Promise((resolve, reject) => {
      const data: Buffer[] = []
      const parser = new FrameParser((id, type, payload) => {
        if (type === T_DATA && id === 1) data.push(Buffer.from(payload))
        if (type === T_RESULT && id === 1) resolve({ result: decodeJson(payload), data: Buffer.concat(data) })
      }, reason => { reject(new Error(`protocol: ${reason}`)) })
      child.stdout.on('data', (c: Buffer) => { parser.push(c) })
      child.stdin.write(encodeJson(1, T_FILE, req))
    })
  } finally { child.stdin.end(); child.kill() }
}

async function listen (host: string): Promise<Server | null> {
  const server = createServer()
  return await new Promise(resolve => {
    server.once('error', () => { resolve(null) })
    server.listen(0, host, () => { resolve(server) })
  })
}

t.test('the agent lists the listening TCP sockets of its network namespace (sock_diag, not /proc/net/tcp)', { skip }, async t => { // docs/performance.md
  const v4 = await listen('127.0.0.1')
  const v6 = await listen('::1')
  t.teardown(() => { v4?.close(); v6?.close() })
  if (v4 === null) { t.fail('cannot listen on 127.0.0.1'); return }
  const { result, data } = await fileOp({ op: 'listening', max: 4096 })
  t.equal(result.ok, true, `answered: ${JSON.stringify(result)}`)
  const sockets = parseListening(data)
  t.ok(sockets.some(s => s.family === 4 && s.address === '127.0.0.1' && s.port === (v4.address() as AddressInfo).port), 'the IPv4 listener')
  if (v6 !== null) t.ok(sockets.some(s => s.family === 6 && s.address === '::1' && s.port === (v6.address() as AddressInfo).port), 'the IPv6 listener')
  const one = await fileOp({ op: 'listening', max: 1 })
  t.same([one.data.length, one.result.more], [20, true], 'at most `max` records, and `more` says some were left out')
})

t.test('an EXEC asking for `listening` gets the listening sockets with its EXIT; one that does not gets none', { skip }, async t => { // docs/performance.md
  const v4 = await listen('127.0.0.1')
  t.teardown(() => { v4?.close() })
  if (v4 === null) { t.fail('cannot listen on 127.0.0.1'); return }
  const child = spawn('python3', ['-I', '-S', '-B', SCRIPT], { stdio: ['pipe', 'pipe', 'inherit'] })
  t.teardown(() => { child.stdin.end(); child.kill() })
  const exits = new Map<number, ReturnType<typeof parseExit>>()
  let wake = (): void => {}
  const parser = new FrameParser((id, type, payload) => {
    if (type === T_EXIT) { exits.set(id, parseExit(Buffer.from(payload))); wake() }
  }, reason => { throw new Error(`protocol: ${reason}`) })
  child.stdout.on('data', (c: Buffer) => { parser.push(c) })
  const exec = (id: number, extra: Record<string, unknown>): void => {
    child.stdin.write(encodeJson(id, T_EXEC, { argv: ['sh', '-c', 'true'], cwd: '/', env: {}, merged: true, stdin: false, ...extra }))
  }
  exec(1, { listening: 4096 })
  exec(2, {})
  exec(3, { listening: 1 })
  while (exits.size < 3) await new Promise<void>(resolve => { wake = resolve })
  const asked = exits.get(1)?.listening
  t.equal(asked?.more, false)
  t.ok(parseListening(asked?.records ?? Buffer.alloc(0)).some(s => s.address === '127.0.0.1' && s.port === (v4.address() as AddressInfo).port), 'the listener, read after the command')
  t.equal(exits.get(2)?.listening, undefined, 'not asked: only the code and the pids hint')
  t.same([exits.get(3)?.listening?.records.length, exits.get(3)?.listening?.more], [20, true], 'at most what was asked')
})
