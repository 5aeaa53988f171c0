/*
 * The agent's TCP connections (CONNECT, docs/contract.md#in-sandbox-agent): cubicle-agent.py run by the
 * host's python3 (no Docker) behind the server's own AgentConnection and connectRequest(), against servers
 * this file starts on the host's loopback. Echo both ways, 127.0.0.1 then ::1, refusal, a reader that
 * stops reading (the agent's window holds the app back), and an agent that lies about the window.
 */
import t, { type Test } from 'tap'
import { spawn, spawnSync } from 'node:child_process'
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net'
import { PassThrough } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { AgentConnection } from '../../../plugins/sandbox/agent-connection.js'
import { AgentConnectError, CONNECT_WINDOW, connectRequest } from '../../../plugins/sandbox/agent-connect.js'
import { decodeJson, encodeFrame, encodeJson, FrameParser, T_CONNECTED, T_CREDIT, T_HELLO, T_OUT } from '../../../plugins/sandbox/agent-protocol.js'

const SCRIPT = fileURLToPath(new URL('../../../sandbox-image/agent/cubicle-agent.py', import.meta.url))
const python = spawnSync('python3', ['-c', 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)']).status === 0
const skip = python ? false : 'python3 ≥ 3.9 is missing on this host'
const sleep = async (ms: number): Promise<void> => await new Promise(resolve => setTimeout(resolve, ms))

/** CREDIT frames the agents of this file sent */
let credits = 0

/** The agent over its stdin/stdout with the server's connection object in front. -B: no __pycache__ in the sources. */
async function startAgent (t: Test): Promise<AgentConnection> {
  const child = spawn('python3', ['-I', '-S', '-B', SCRIPT], { stdio: ['pipe', 'pipe', 'inherit'] })
  const conn = new AgentConnection({ write: frame => child.stdin.write(frame), destroy: () => { child.kill() } }, () => {})
  let hello: () => void = () => {}
  const ready = new Promise<void>(resolve => { hello = resolve })
  const parser = new FrameParser((id, type, payload) => {
    if (type === T_HELLO) { conn.canConnect = decodeJson(payload).connect === true; hello(); return }
    if (type === T_CREDIT) credits++
    conn.dispatch(id, type, payload)
  }, reason => { conn.close(`protocol: ${reason}`) })
  child.stdout.on('data', (c: Buffer) => { try { parser.push(c) } catch (err) { conn.close(String(err)) } })
  child.stdout.once('end', () => { conn.close() })
  t.teardown(() => { conn.close(); child.kill() })
  await ready
  return conn
}

async function listen (t: Test, host: string, onConnection: (s: Socket) => void): Promise<number | undefined> {
  const server: Server = createServer(s => { s.on('error', () => {}); onConnection(s) })
  const ok = await new Promise<boolean>(resolve => {
    server.once('error', () => { resolve(false) })
    server.listen(0, host, () => { resolve(true) })
  })
  if (!ok) return undefined
  t.teardown(() => { server.close() })
  return (server.address() as AddressInfo).port
}

const echo = (s: Socket): void => { s.pipe(s) }

t.test('echo both ways, on 127.0.0.1 and on an app listening only on ::1; nothing listening is ECONNREFUSED', { skip }, async t => {
  const conn = await startAgent(t)
  t.ok(conn.canConnect, 'the agent says it serves CONNECT')
  const port4 = await listen(t, '127.0.0.1', echo) as number
  const socket = await connectRequest(conn, port4, { timeoutMs: 5000 })
  if (socket === undefined) throw new Error('no socket')
  const big = Buffer.alloc(5 * CONNECT_WINDOW, 'a')
  const got: Buffer[] = []
  let n = 0
  socket.on('data', (c: Buffer) => { got.push(c); n += c.length })
  socket.write(Buffer.from('hello '))
  socket.write(big)
  while (n < big.length + 6) await sleep(20)
  t.equal(Buffer.concat(got).toString('latin1', 0, 6), 'hello ', 'bytes in order')
  t.equal(n, big.length + 6, `${n} bytes echoed through windows of ${CONNECT_WINDOW}`)
  socket.destroy()

  const port6 = await listen(t, '::1', echo)
  if (port6 === undefined) t.comment('no IPv6 loopback on this host: the ::1 case is skipped')
  else {
    const s6 = await connectRequest(conn, port6, { timeoutMs: 5000 })
    const back = await new Promise<string>(resolve => { s6?.once('data', (c: Buffer) => { resolve(c.toString()) }); s6?.write('six') })
    t.equal(back, 'six', 'an app on ::1 only is reached')
    s6?.destroy()
  }
  const closed = await listen(t, '127.0.0.1', s => { s.destroy() }) as number
  await new Promise(resolve => setTimeout(resolve, 10))
  const free = await new Promise<number>(resolve => { const s = createServer(); s.listen(0, '127.0.0.1', () => { const p = (s.address() as AddressInfo).port; s.close(() => { resolve(p) }) }) })
  await t.rejects(connectRequest(conn, free, { timeoutMs: 5000 }), { name: 'AgentConnectError', code: 'ECONNREFUSED' })
  // An app that closes at once: the connection ends (EXIT), no error on our side.
  const shut = await connectRequest(conn, closed, { timeoutMs: 5000 })
  shut?.resume()
  await new Promise(resolve => shut?.once('close', resolve))
  t.ok(shut?.destroyed, 'the app closing ends the socket')
  t.equal(conn.pending, 0, 'nothing left in flight on the agent stream')
  t.ok(new AgentConnectError(111, 'x') instanceof Error)
})

t.test('small requests cost no CREDIT frame: credits come a quarter of the window at a time', { skip }, async t => { // docs/performance.md, (k)
  const conn = await startAgent(t)
  const port = await listen(t, '127.0.0.1', echo) as number
  const socket = await connectRequest(conn, port, { timeoutMs: 5000 })
  if (socket === undefined) throw new Error('no socket')
  const before = credits
  for (let i = 0; i < 50; i++) {
    const back = await new Promise<string>(resolve => { socket.once('data', (c: Buffer) => { resolve(c.toString()) }); socket.write(`request ${i}`) })
    t.equal(back, `request ${i}`)
  }
  t.equal(credits - before, 0, 'no frame back for 50 small requests')
  // A full window and more still flows (the echo test above moves five windows).
  const big = Buffer.alloc(2 * CONNECT_WINDOW, 'b')
  let n = 0
  socket.on('data', (c: Buffer) => { n += c.length })
  socket.write(big)
  while (n < big.length) await sleep(20)
  t.ok(credits - before >= 4 && credits - before <= 8, `${credits - before} credits for ${big.length} bytes`)
  socket.destroy()
})

t.test('an answer and the app\'s close in one go: the answer is read whole, then the socket ends', { skip }, async t => {
  const conn = await startAgent(t)
  const port = await listen(t, '127.0.0.1', s => { s.end('answer then close') }) as number
  for (let i = 0; i < 20; i++) {
    const socket = await connectRequest(conn, port, { timeoutMs: 5000 })
    // Read only later: the EXIT may well have arrived already.
    await sleep(i % 2 === 0 ? 50 : 0)
    const parts: Buffer[] = []
    socket?.on('data', (c: Buffer) => parts.push(c))
    await new Promise(resolve => socket?.once('close', resolve))
    t.equal(Buffer.concat(parts).toString(), 'answer then close', `round ${i}`)
  }
})

t.test('an answer of several windows and the app\'s close, read late: every byte arrives before the end', { skip }, async t => {
  const conn = await startAgent(t)
  const size = 3 * CONNECT_WINDOW + 123
  const port = await listen(t, '127.0.0.1', s => { s.end(Buffer.alloc(size, 'z')) }) as number
  const socket = await connectRequest(conn, port, { timeoutMs: 5000 })
  if (socket === undefined) throw new Error('no socket')
  // The app has closed long before the reader starts: the agent holds what is beyond the window until ACKs come.
  await sleep(300)
  let n = 0
  socket.on('data', (c: Buffer) => { n += c.length })
  await new Promise(resolve => socket.once('close', resolve))
  t.equal(n, size, `${n} bytes, then the end`)
  t.equal(conn.pending, 0, 'nothing left in flight on the agent stream')
})

t.test('setTimeout is net.Socket\'s idle timeout: quiet for that long emits timeout, bytes either way postpone it, 0 turns it off', { skip }, async t => {
  const conn = await startAgent(t)
  const port = await listen(t, '127.0.0.1', echo) as number
  const socket = await connectRequest(conn, port, { timeoutMs: 5000 })
  if (socket === undefined) throw new Error('no socket')
  socket.resume()
  let fired = 0
  const onTimeout = (): void => { fired++ }
  socket.setTimeout(300, onTimeout)
  for (let i = 0; i < 6; i++) { socket.write('x'); await sleep(100) }
  t.equal(fired, 0, 'no timeout while bytes flow every 100 ms')
  await sleep(500)
  t.equal(fired, 1, 'one timeout after 300 ms of quiet')
  socket.setTimeout(300, onTimeout)
  socket.setTimeout(0, onTimeout)
  await sleep(500)
  t.equal(fired, 1, 'off: no timeout, and the callback is removed')
  t.equal(socket.listenerCount('timeout'), 0)
  socket.destroy()
})

t.test('a reader that stops reading holds the app back at the window; other connections go on', { skip }, async t => {
  const conn = await startAgent(t)
  let written = 0
  let stop = false
  const port = await listen(t, '127.0.0.1', s => {
    const chunk = Buffer.alloc(64 * 1024, 'z')
    const pump = (): void => { while (!stop && s.write(chunk)) written += chunk.length; if (!stop) s.once('drain', () => { written += chunk.length; pump() }) }
    pump()
  }) as number
  t.teardown(() => { stop = true })
  const slow = await connectRequest(conn, port, { timeoutMs: 5000 })
  if (slow === undefined) throw new Error('no socket')
  slow.pause()
  await sleep(1500)
  const buffered = slow.readableLength
  t.ok(buffered <= CONNECT_WINDOW + 256 * 1024, `the server holds ${buffered} bytes of a reader that does not read (window ${CONNECT_WINDOW})`)
  t.ok(written < 64 * 1024 * 1024, `the app could write only ${written} bytes (kernel buffers + the window)`)
  const port2 = await listen(t, '127.0.0.1', echo) as number
  const other = await connectRequest(conn, port2, { timeoutMs: 5000 })
  const back = await new Promise<string>(resolve => { other?.once('data', (c: Buffer) => { resolve(c.toString()) }); other?.write('still here') })
  t.equal(back, 'still here', 'another connection on the same agent stream is not blocked')
  let more = 0
  slow.on('data', (c: Buffer) => { more += c.length })
  slow.resume()
  while (more < 8 * CONNECT_WINDOW) await sleep(20)
  t.pass(`reading again: ${more} bytes more came`)
  stop = true
  slow.destroy()
  other?.destroy()
})

t.test('an agent that sends beyond the window or credits bytes never sent breaks the protocol', async t => {
  const sent: Buffer[] = []
  const conn = new AgentConnection(new PassThrough({ write: (c: Buffer, _e, done) => { sent.push(c); done() } }) as never, () => {})
  const pending = connectRequest(conn, 3000, { timeoutMs: 5000 })
  const id = sent[0]?.readUInt32BE(4) as number
  conn.dispatch(id, T_CONNECTED, encodeJson(id, T_CONNECTED, { family: 4 }).subarray(9))
  const socket = await pending
  if (socket === undefined) throw new Error('no socket')
  socket.pause()
  conn.dispatch(id, T_OUT, Buffer.alloc(CONNECT_WINDOW))
  t.throws(() => { conn.dispatch(id, T_OUT, Buffer.alloc(1)) }, { name: 'ProtocolError', message: /beyond the window/ })
  t.throws(() => { conn.dispatch(id, 9, Buffer.from([0, 0, 0, 1])) }, { name: 'ProtocolError', message: /never sent/ })
  t.throws(() => { conn.dispatch(id, T_HELLO, Buffer.alloc(0)) }, { name: 'ProtocolError' })
  t.equal(encodeFrame(1, T_OUT).length, 9)
})
