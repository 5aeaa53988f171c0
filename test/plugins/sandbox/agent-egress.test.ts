/*
 * The agent's egress relay (sandbox-image/agent/cubicle_egress.py, docs/network.md#egress-over-the-agent-socket):
 * cubicle-agent.py run by the host's python3 (no Docker) with CUBICLE_EGRESS_PORT and the socket path of a Unix
 * server this file starts. The relay listens before HELLO, passes bytes both ways with half-close, holds a
 * big transfer within bounded memory (a slow reader holds the sender back), bounds its connections and
 * closes a connection it cannot relay.
 */
import t, { type Test } from 'tap'
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { FrameParser, T_HELLO } from '../../../plugins/sandbox/agent-protocol.js'
import { tempDir } from '../../fixtures/temp-dir.js'

const SCRIPT = fileURLToPath(new URL('../../../sandbox-image/agent/cubicle-agent.py', import.meta.url))
const python = spawnSync('python3', ['-c', 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)']).status === 0
const skip = python ? false : 'python3 ≥ 3.9 is missing on this host'
const sleep = async (ms: number): Promise<void> => await new Promise(resolve => setTimeout(resolve, ms))

async function freePort (): Promise<number> {
  const s = createServer()
  await new Promise<void>(resolve => s.listen(0, '127.0.0.1', resolve))
  const port = (s.address() as AddressInfo).port
  await new Promise<void>(resolve => s.close(() => { resolve() }))
  return port
}

/** A Unix server at `<dir>/egress.sock` (the engine's end) handing each connection to `onConnection`. */
async function unixServer (t: Test, onConnection: (s: Socket) => void): Promise<{ path: string, server: Server }> {
  const dir = await tempDir(t, 'cubicle-egress')
  const path = join(dir, 'egress.sock')
  const server = createServer({ allowHalfOpen: true }, s => { s.on('error', () => {}); onConnection(s) })
  await new Promise<void>(resolve => server.listen(path, resolve))
  t.teardown(() => { server.close() })
  return { path, server }
}

/** The agent over stdin/stdout with the relay on; resolves at its HELLO. -B: no __pycache__ in the sources. */
async function startAgent (t: Test, port: number, path: string): Promise<ChildProcess> {
  const child = spawn('python3', ['-I', '-S', '-B', SCRIPT], { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, CUBICLE_EGRESS_PORT: String(port), CUBICLE_EGRESS_SOCKET: path } })
  t.teardown(() => { child.stdin?.end(); child.kill() })
  await new Promise<void>((resolve, reject) => {
    const parser = new FrameParser((_id, type) => { if (type === T_HELLO) resolve() }, reason => { reject(new Error(reason)) })
    child.stdout?.on('data', (c: Buffer) => { parser.push(c) })
    child.once('exit', code => { reject(new Error(`agent exited ${String(code)}`)) })
  })
  return child
}

async function dial (host: string, port: number): Promise<Socket> {
  const s = connect({ host, port, allowHalfOpen: true })
  await new Promise<void>((resolve, reject) => { s.once('connect', resolve); s.once('error', reject) })
  return s
}

async function readAll (s: Socket): Promise<Buffer> {
  const parts: Buffer[] = []
  s.on('data', (c: Buffer) => parts.push(c))
  await new Promise<void>(resolve => { s.once('end', resolve); s.once('close', resolve) })
  s.destroy()
  return Buffer.concat(parts)
}

function rssKiB (pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return m === null ? 0 : Number(m[1])
}

t.test('listening before HELLO; bytes both ways and a half-close pass through; IPv6 loopback too when present', { skip, timeout: 60_000 }, async t => {
  const { path } = await unixServer(t, s => {
    const got: Buffer[] = []
    s.on('data', (c: Buffer) => got.push(c))
    // The sandbox's side ended its writes: answer after it, then end ours.
    s.once('end', () => { s.end(`got:${Buffer.concat(got).toString()}`) })
  })
  const port = await freePort()
  await startAgent(t, port, path)
  const c = await dial('127.0.0.1', port)
  c.end('CONNECT example.test:443 HTTP/1.1\r\n\r\n')
  t.equal((await readAll(c)).toString(), 'got:CONNECT example.test:443 HTTP/1.1\r\n\r\n', 'the answer after the half-close arrives whole')

  const six = await dial('::1', port).catch(() => null)
  if (six === null) t.comment('no IPv6 loopback on this host: the ::1 case is skipped')
  else {
    six.end('six')
    t.equal((await readAll(six)).toString(), 'got:six', '[::1] relays too')
  }
})

t.test('50 MB each way through the relay with a slow reader: every byte, in order, and the agent\'s memory stays bounded', { skip, timeout: 60_000 }, async t => {
  const SIZE = 50 * 1024 * 1024
  const { path } = await unixServer(t, s => {
    // Echo with backpressure: the sandbox's side reads slowly at first, so the relay must hold the writer back.
    s.pipe(s)
  })
  const port = await freePort()
  const agent = await startAgent(t, port, path)
  const before = rssKiB(agent.pid as number, 'VmRSS')
  const c = await dial('127.0.0.1', port)
  const block = Buffer.alloc(1024 * 1024)
  for (let i = 0; i < block.length; i++) block[i] = (i * 7 + 3) & 0xff
  let received = 0
  let bad = 0
  let peak = 0
  c.pause()
  const writer = (async () => {
    for (let sent = 0; sent < SIZE; sent += block.length) {
      if (!c.write(block)) await new Promise(resolve => c.once('drain', resolve))
    }
    c.end()
  })()
  // Nothing read for a while: the relay's buffers fill, then everything must wait (not grow).
  await sleep(1500)
  peak = Math.max(peak, rssKiB(agent.pid as number, 'VmRSS'))
  c.on('data', (chunk: Buffer) => {
    for (let i = 0; i < chunk.length; i += 4099) if (chunk[i] !== block[(received + i) % block.length]) bad++
    received += chunk.length
  })
  c.resume()
  const started = performance.now()
  await new Promise<void>(resolve => { c.once('end', resolve) })
  const ms = performance.now() - started
  await writer
  peak = Math.max(peak, rssKiB(agent.pid as number, 'VmHWM'))
  t.equal(received, SIZE, 'every byte came back')
  t.equal(bad, 0, 'in order')
  t.comment(`agent RSS ${before} KiB before, peak ${peak} KiB; ${(2 * SIZE / 1024 / 1024 / (ms / 1000)).toFixed(0)} MB/s through the relay (both ways counted)`)
  t.ok(peak - before < 24 * 1024, `the agent grew ${peak - before} KiB (< 24 MiB) for a transfer of 100 MB`)
  c.destroy()
})

t.test('at most 128 connections at once: more are closed at accept; nothing listening on the socket closes the connection', { skip, timeout: 60_000 }, async t => {
  const held: Socket[] = []
  const { path, server } = await unixServer(t, s => { held.push(s) })
  const port = await freePort()
  await startAgent(t, port, path)
  const clients: Socket[] = []
  for (let i = 0; i < 128; i++) clients.push(await dial('127.0.0.1', port))
  while (held.length < 128) await sleep(20)
  const extra = await dial('127.0.0.1', port)
  const extraEnded = await Promise.race([readAll(extra).then(() => true), sleep(5000).then(() => false)])
  t.ok(extraEnded, 'the 129th connection is closed')
  t.equal(held.length, 128, 'and never reached the engine')
  // One ends: room for another.
  clients[0]?.destroy()
  held[0]?.destroy()
  await sleep(200)
  const again = await dial('127.0.0.1', port)
  while (held.length < 129) await sleep(20)
  t.pass('a connection after one ended is relayed')
  for (const c of [...clients, again, extra]) c.destroy()
  for (const s of held) s.destroy()

  server.close()
  await sleep(100)
  const orphan = await dial('127.0.0.1', port)
  const ended = await Promise.race([readAll(orphan).then(() => true), sleep(5000).then(() => false)])
  t.ok(ended, 'with nobody listening on egress.sock the connection is closed')
})

t.test('a port taken at the start is taken up once it is free', { skip, timeout: 60_000 }, async t => {
  const { path } = await unixServer(t, s => { s.end('relayed') })
  const squatter = createServer(s => { s.end('squatter') })
  await new Promise<void>(resolve => squatter.listen(0, '127.0.0.1', resolve))
  const port = (squatter.address() as AddressInfo).port
  await startAgent(t, port, path)
  t.equal((await readAll(await dial('127.0.0.1', port))).toString(), 'squatter', 'the port was taken: the agent started anyway')
  await new Promise<void>(resolve => squatter.close(() => { resolve() }))
  let answer = ''
  for (let i = 0; i < 60 && answer !== 'relayed'; i++) {
    await sleep(100)
    answer = await dial('127.0.0.1', port).then(readAll).then(b => b.toString(), () => '')
  }
  t.equal(answer, 'relayed', 'the relay listens once the port is free')
})
