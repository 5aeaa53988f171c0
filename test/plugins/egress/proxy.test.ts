import t from 'tap'
import type { Test } from 'tap'
import { connect as netConnect, createServer, type AddressInfo, type Socket } from 'node:net'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import http from 'node:http'
import Fastify from 'fastify'
import { addressSet } from '../../../plugins/egress/addresses.js'
import { createEgressProxy, type ProxyLimits } from '../../../plugins/egress/proxy.js'
import { parseRules } from '../../../plugins/egress/rules.js'
import type { Policy } from '../../../plugins/egress/policy.js'
import type { ConnectionRecord } from '../../../plugins/egress/types.js'

// the proxy on loopback only; upstreams are servers this test starts.

const LIMITS: ProxyLimits = { maxConnectionsPerChat: 3, maxConnections: 100, idleTimeoutMs: 400, connectTimeoutMs: 2000, headTimeoutMs: 1000, bytesPerSecond: 0 }

async function canary (t: Test, text: string): Promise<number> {
  const server = http.createServer((req, res) => {
    if (req.url === '/big') { res.end(Buffer.alloc(300 * 1024, 97)); return }
    let body = ''
    req.on('data', (c: Buffer) => { body += c.toString() })
    req.on('end', () => { res.end(`${text} ${req.method ?? ''} ${req.url ?? ''} ${req.headers['proxy-authorization'] ?? 'no-proxy-auth'} ${body}`) })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.closeAllConnections(); server.close() })
  return (server.address() as AddressInfo).port
}

async function proxy (t: Test, allow: (ports: { a: number }) => string, limits = LIMITS, identify = (a: string) => a === '127.0.0.1' ? 'chat-a' : null) {
  const a = await canary(t, 'canary-a')
  const b = await canary(t, 'canary-b')
  const log: ConnectionRecord[] = []
  const policy: Policy = { mode: 'open', rules: parseRules(allow({ a })), hostAddresses: addressSet([]) }
  const names: Record<string, string[]> = { 'canary-a.test': ['127.0.0.1'], 'canary-b.test': ['127.0.0.1'], 'multi.test': ['10.0.0.1', '127.0.0.1'] }
  const p = createEgressProxy({
    log: Fastify({ logger: false }).log,
    identify,
    policyFor: () => policy,
    lookup: async host => {
      const found = names[host]
      if (found === undefined) throw Object.assign(new Error('nx'), { code: 'ENOTFOUND' })
      return found
    },
    record: (_chat, r) => { log.push(r) }
  }, limits)
  const port = await p.listen('127.0.0.1', 0)
  t.teardown(async () => { await p.close() })
  return { port, a, b, log, p }
}

function viaProxy (port: number, url: string, body?: string): Promise<{ status: number, text: string, message: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: body === undefined ? 'GET' : 'POST', path: url, headers: { 'proxy-authorization': 'Basic secret' } }, res => {
      let text = ''
      res.on('data', (c: Buffer) => { text += c.toString() })
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, text, message: res.statusMessage ?? '' }) })
    })
    req.on('error', reject)
    req.end(body)
  })
}

function tunnel (port: number, authority: string): Promise<{ status: number, message: string, socket: Socket }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'CONNECT', path: authority })
    req.on('connect', (res, socket) => { resolve({ status: res.statusCode ?? 0, message: res.statusMessage ?? '', socket }) })
    req.on('error', reject)
    req.end()
  })
}

async function getThrough (socket: Socket, path: string): Promise<string> {
  socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)
  let text = ''
  for await (const chunk of socket) text += (chunk as Buffer).toString()
  return text
}

t.test('forwards plain HTTP to an allowed upstream and strips proxy credentials', async t => {
  const { port, a, log } = await proxy(t, ({ a }) => `127.0.0.1:${a}`)
  const res = await viaProxy(port, `http://canary-a.test:${a}/hello?x=1`, 'payload')
  t.equal(res.status, 200)
  t.equal(res.text, 'canary-a POST /hello?x=1 no-proxy-auth payload')
  await new Promise(resolve => setTimeout(resolve, 50))
  t.match(log, [{ host: 'canary-a.test', port: a, decision: 'allowed', reason: 'rule', method: 'HTTP', address: '127.0.0.1' }])
  t.ok((log[0]?.bytesDown ?? 0) > 40, 'bytes counted')
})

t.test('tunnels CONNECT to an allowed upstream; refuses the second canary with the policy message', async t => {
  const { port, a, b, log } = await proxy(t, ({ a }) => `127.0.0.1:${a}`)
  const ok = await tunnel(port, `canary-a.test:${a}`)
  t.equal(ok.status, 200)
  t.match(await getThrough(ok.socket, '/through'), /canary-a GET \/through/)
  const no = await tunnel(port, `canary-b.test:${b}`)
  t.equal(no.status, 403)
  t.equal(no.message, 'blocked by the sandbox egress policy: canary-b.test (127.0.0.1) is a loopback address; only an explicit address rule in EGRESS_ALLOW can allow it')
  no.socket.destroy()
  const plain = await viaProxy(port, `http://canary-b.test:${b}/`)
  t.equal(plain.status, 403)
  t.match(plain.text, /^blocked by the sandbox egress policy: canary-b\.test/)
  await new Promise(resolve => setTimeout(resolve, 50))
  t.same(log.map(r => r.decision).sort(), ['allowed', 'denied', 'denied'])
})

t.test('dials an allowed address of a name and never a denied one', async t => {
  const { port, a, log } = await proxy(t, ({ a }) => `127.0.0.1:${a}`)
  const res = await viaProxy(port, `http://multi.test:${a}/`)
  t.equal(res.status, 200, '10.0.0.1 is skipped, the allowed 127.0.0.1 is dialled')
  await new Promise(resolve => setTimeout(resolve, 50))
  t.equal(log[0]?.address, '127.0.0.1')
})

t.test('unknown names, malformed requests, oversized heads and https:// in plain form get clear 4xx/5xx', async t => {
  const { port } = await proxy(t, () => '')
  t.match(await viaProxy(port, 'http://nowhere.test/'), { status: 502, message: /cannot resolve nowhere\.test: ENOTFOUND/ })
  t.match(await viaProxy(port, '/relative'), { status: 400, message: /only absolute http/ })
  t.match(await viaProxy(port, 'https://x.test/'), { status: 400, message: /set HTTPS_PROXY/ })
  const big = await new Promise<string>((resolve) => {
    const s = netConnect(port, '127.0.0.1')
    let text = ''
    s.on('data', (c: Buffer) => { text += c.toString() })
    s.on('close', () => { resolve(text) })
    s.on('error', () => {})
    s.write(`GET http://x.test/ HTTP/1.1\r\nX: ${'a'.repeat(20000)}\r\n\r\n`)
  })
  t.match(big, /^HTTP\/1\.1 400 bad proxy request: request head larger than 16 KiB/)
})

t.test('a connection from an address that is no sandbox is refused', async t => {
  const { port, a } = await proxy(t, ({ a }) => `127.0.0.1:${a}`, LIMITS, () => null)
  t.match(await viaProxy(port, `http://canary-a.test:${a}/`), { status: 403, message: /not a running sandbox/ })
})

t.test('caps open connections per chat and closes idle tunnels', async t => {
  const { port, a, p } = await proxy(t, ({ a }) => `127.0.0.1:${a}`)
  const open = await Promise.all([1, 2, 3].map(async () => await tunnel(port, `canary-a.test:${a}`)))
  t.same(open.map(o => o.status), [200, 200, 200])
  t.equal(p.open('chat-a'), 3)
  const fourth = await viaProxy(port, `http://canary-a.test:${a}/`)
  t.match(fourth, { status: 429, message: /more than 3 open connections/ })
  const started = Date.now()
  await Promise.all(open.map(async o => await new Promise(resolve => { o.socket.on('close', resolve); o.socket.resume() })))
  t.ok(Date.now() - started < 3000, 'idle tunnels closed by the 400 ms idle timeout')
  await new Promise(resolve => setTimeout(resolve, 50))
  t.equal(p.open('chat-a'), 0)
  t.equal((await viaProxy(port, `http://canary-a.test:${a}/`)).status, 200, 'slots are free again')
})

t.test('a client that never sends a request is dropped after the head timeout', async t => {
  const { port } = await proxy(t, () => '')
  const text = await new Promise<string>(resolve => {
    const s = netConnect(port, '127.0.0.1')
    let out = ''
    s.on('data', (c: Buffer) => { out += c.toString() })
    s.on('close', () => { resolve(out) })
  })
  t.match(text, /400 bad proxy request: no request within the time limit/)
})

t.test('caps a chat\'s bandwidth over all its connections', async t => {
  const { port, a } = await proxy(t, ({ a }) => `127.0.0.1:${a}`, { ...LIMITS, idleTimeoutMs: 10_000, bytesPerSecond: 200 * 1024 })
  const started = Date.now()
  const results = await Promise.all([1, 2].map(async () => await viaProxy(port, `http://canary-a.test:${a}/big`)))
  const elapsed = Date.now() - started
  t.same(results.map(r => r.text.length), [300 * 1024, 300 * 1024], 'both downloads complete')
  // 600 KiB at 200 KiB/s with a 200 KiB burst: at least 2 s (bound checked with slack for timers)
  t.ok(elapsed >= 1800, `two parallel downloads share one 200 KiB/s bucket (took ${elapsed} ms)`)
})

t.test('a connection handed over with its chat (egress over the agent socket) is served as that chat: its policy, log and slots', async t => {
  const chats = new Map<string, Policy>()
  const log: Array<{ chat: string, r: ConnectionRecord }> = []
  const a = await canary(t, 'canary-a')
  chats.set('chat-open', { mode: 'open', rules: parseRules(`127.0.0.1:${a}`), hostAddresses: addressSet([]) })
  chats.set('chat-off', { mode: 'off', rules: [], hostAddresses: addressSet([]) })
  const p = createEgressProxy({
    log: Fastify({ logger: false }).log,
    // The TCP listener knows nobody: only what accept() hands over is served.
    identify: () => null,
    policyFor: chat => chats.get(chat) as Policy,
    lookup: async () => ['127.0.0.1'],
    record: (chat, r) => { log.push({ chat, r }) }
  }, { ...LIMITS, maxConnectionsPerChat: 1 })
  t.teardown(async () => { await p.close() })
  // A Unix socket pair stands for the engine's egress.sock: its server side goes to accept() with a chat.
  const dir = await mkdtemp(join(tmpdir(), 'proxy-accept-'))
  t.teardown(async () => { await rm(dir, { recursive: true, force: true }) })
  let next = 'chat-open'
  const unix = createServer(sock => { p.accept(sock, next) })
  await new Promise<void>(resolve => unix.listen(join(dir, 's'), resolve))
  t.teardown(() => { unix.close() })
  const ask = async (chat: string): Promise<string> => {
    next = chat
    const s = netConnect(join(dir, 's'))
    s.write(`GET http://canary-a.test:${a}/x HTTP/1.1\r\nHost: canary-a.test\r\nConnection: close\r\n\r\n`)
    let text = ''
    for await (const chunk of s) text += (chunk as Buffer).toString()
    return text
  }
  t.match(await ask('chat-open'), /^HTTP\/1\.1 200[\s\S]*canary-a GET \/x/, 'the open chat reaches the canary')
  t.match(await ask('chat-off'), /^HTTP\/1\.1 403/, 'the chat with egress off is refused')
  t.same(log.map(l => [l.chat, l.r.decision]), [['chat-open', 'allowed'], ['chat-off', 'denied']], 'each logged under its own chat')
  // Slots: one open connection per chat here; a second one of the same chat is refused while the first is open.
  next = 'chat-open'
  const held = netConnect(join(dir, 's'))
  held.write(`CONNECT canary-a.test:${a} HTTP/1.1\r\n\r\n`)
  await new Promise(resolve => held.once('data', resolve))
  t.match(await ask('chat-open'), /^HTTP\/1\.1 429/, 'the chat\'s connection slots apply')
  held.destroy()
})

t.test('a handed-over connection that closed while its chat\'s layers were read holds no slot', async t => {
  const a = await canary(t, 'canary-a')
  const p = createEgressProxy({
    log: Fastify({ logger: false }).log,
    identify: () => null,
    policyFor: () => ({ mode: 'open', rules: parseRules(`127.0.0.1:${a}`), hostAddresses: addressSet([]) }),
    lookup: async () => ['127.0.0.1'],
    record: () => {}
  }, { ...LIMITS, maxConnectionsPerChat: 1 })
  t.teardown(async () => { await p.close() })
  const dir = await mkdtemp(join(tmpdir(), 'proxy-closed-'))
  t.teardown(async () => { await rm(dir, { recursive: true, force: true }) })
  // The egress service hands a connection over once the chat's layers are read (a disk read): here the
  // sandbox's side gave up before that.
  const accepted: Socket[] = []
  const unix = createServer(sock => { accepted.push(sock) })
  await new Promise<void>(resolve => unix.listen(join(dir, 's'), resolve))
  t.teardown(() => { unix.close() })
  const gone = netConnect(join(dir, 's'))
  while (accepted.length === 0) await new Promise(resolve => setTimeout(resolve, 5))
  const late = accepted[0] as Socket
  late.on('error', () => {})
  gone.destroy()
  await new Promise(resolve => late.once('close', resolve))
  p.accept(late, 'chat-x')
  t.equal(p.open('chat-x'), 0, 'no connection slot taken for it')
  const s = netConnect(join(dir, 's'))
  while (accepted.length < 2) await new Promise(resolve => setTimeout(resolve, 5))
  p.accept(accepted[1] as Socket, 'chat-x')
  s.write(`GET http://canary-a.test:${a}/y HTTP/1.1\r\nHost: canary-a.test\r\nConnection: close\r\n\r\n`)
  let text = ''
  for await (const chunk of s) text += (chunk as Buffer).toString()
  t.match(text, /^HTTP\/1\.1 200/, 'the chat\'s next connection is served (its one slot is free)')
})
