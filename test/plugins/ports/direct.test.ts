// The direct route to an app (plugins/ports/direct.ts) without Docker: loopback addresses 127.0.0.2 and 127.0.0.3
// stand in for sandbox addresses, a fake engine answers appAddress, and the relay is a server on 127.0.0.1.
// What it shows: an address is used only once the engine confirmed, after the connection was made, that the
// same holding of it is the chat's sandbox; a stale one (given to another sandbox) never gets a byte.
import t from 'tap'
import type { Test } from 'tap'
import { createServer, get, type Server } from 'node:http'
import { connect, createServer as createNetServer, type AddressInfo } from 'node:net'
import pino from 'pino'
import { createDirectRoute, dial } from '../../../plugins/ports/direct.js'
import { createPortsService } from '../../../plugins/ports/service.js'
import type { AppAddress, SandboxService } from '../../../plugins/sandbox/types.js'
import type { LinkService } from '../../../plugins/capabilities/types.js'

interface App { server: Server, requests: number, connections: number }

async function app (t: Test, name: string, host: string, port = 0): Promise<App & { port: number }> {
  const seen = { requests: 0, connections: 0 }
  const server = createServer((_req, res) => { seen.requests++; res.end(name) })
  server.on('connection', () => { seen.connections++ })
  await new Promise<void>((resolve, reject) => { server.once('error', reject); server.listen(port, host, resolve) })
  t.teardown(() => { server.closeAllConnections(); server.close() })
  return Object.assign(seen, { server, port: (server.address() as AddressInfo).port })
}

async function close (a: App): Promise<void> {
  a.server.closeAllConnections()
  await new Promise(resolve => a.server.close(resolve))
}

function harness (t: Test, relayPort: number, answerMs = 0) {
  let answer: AppAddress | null | Error = null
  const asked: string[] = []
  const relayed: number[] = []
  const sandbox = {
    status: async () => ({ state: 'running' as const, metaExists: true }),
    knownRunning: () => true,
    openStream: async () => { throw new Error('not used') },
    connect: async (_chat: string, port: number) => {
      relayed.push(port)
      const s = connect({ host: '127.0.0.1', port: relayPort })
      await new Promise((resolve, reject) => { s.once('connect', resolve); s.once('error', reject) })
      return s
    },
    appAddress: async (chat: string) => {
      asked.push(chat)
      if (answerMs > 0) await new Promise(resolve => setTimeout(resolve, answerMs))
      if (answer instanceof Error) throw answer
      return answer
    }
  } as unknown as SandboxService
  const runtime = createPortsService({ sandbox, links: { publicBaseUrl: 'https://cubicle.example' } as unknown as LinkService, log: pino({ level: 'silent' }) },
    { maxConnectionsPerChat: 4, freeSocketMs: 60_000, hiddenPorts: [], listTimeoutMs: 2000, directConnectTimeoutMs: 1000 })
  t.teardown(async () => { await runtime.close() })
  /** One GET through the chat's pooled agent (a fresh connection: the pool is emptied first). */
  const fetchVia = async (chat: string, port: number): Promise<string> => {
    runtime.sandboxStopped(chat, true)
    return await new Promise<string>((resolve, reject) => {
      get({ agent: runtime.agent(chat), host: '127.0.0.1', port, path: '/' }, res => {
        let body = ''
        res.on('data', (c: Buffer) => { body += c.toString() })
        res.on('end', () => { resolve(body) })
      }).on('error', reject)
    })
  }
  return { runtime, asked, relayed, fetchVia, set: (a: AppAddress | null | Error) => { answer = a } }
}

t.test('an app on the sandbox\'s address is reached directly, only while the engine confirms that very holding of the address', async t => {
  const relay = await app(t, 'relay', '127.0.0.1')
  const a = await app(t, 'sandbox-a', '127.0.0.2')
  const port = a.port
  const h = harness(t, relay.port)
  h.set({ address: '127.0.0.2', generation: 'a/1' })

  t.equal(await h.fetchVia('chat-a', port), 'sandbox-a', 'straight to the address')
  t.same(h.relayed, [], 'no relay')
  t.equal(h.asked.length, 2, 'the engine asked before and once more after the connect (the proof)')
  t.equal(await h.fetchVia('chat-a', port), 'sandbox-a')
  t.equal(h.asked.length, 3, 'a known address: one proof per new connection')

  // Chat A's sandbox stopped behind the server's back and started again elsewhere; its old address now
  // belongs to another chat's sandbox (B). The remembered address is tried, and the proof fails: B gets
  // no request, and this request takes the relay.
  await close(a)
  const b = await app(t, 'sandbox-b', '127.0.0.2', port)
  const a2 = await app(t, 'sandbox-a-again', '127.0.0.3', port)
  h.set({ address: '127.0.0.3', generation: 'a/2' })
  t.equal(await h.fetchVia('chat-a', port), 'relay', 'the address changed hands while connecting: the relay')
  t.equal(b.requests, 0, 'the other sandbox never got a request')
  t.same(h.relayed, [port])
  t.equal(await h.fetchVia('chat-a', port), 'sandbox-a-again', 'then the new address, proven')
  t.equal(b.requests, 0)

  // A stop the server saw: the remembered address (127.0.0.3) is forgotten, never tried again, even though
  // another sandbox holds it now; the engine's new answer is used.
  h.runtime.sandboxStopped('chat-a', false)
  await Promise.all([close(a2), close(b)])
  const other = await app(t, 'sandbox-c', '127.0.0.3', port)
  const a3 = await app(t, 'sandbox-a-third', '127.0.0.2', port)
  h.set({ address: '127.0.0.2', generation: 'a/3' })
  t.equal(await h.fetchVia('chat-a', port), 'sandbox-a-third')
  t.equal(other.connections, 0, 'the address before the stop is not even tried')
  t.equal(a3.requests, 1)
})

t.test('connections made together share the engine\'s answers: two reads after connecting, not one each', async t => {
  const relay = await app(t, 'relay', '127.0.0.1')
  const a = await app(t, 'sandbox-a', '127.0.0.2')
  const h = harness(t, relay.port, 30)
  h.set({ address: '127.0.0.2', generation: 'a/1' })
  const agent = h.runtime.agent('chat-p')
  const one = async (): Promise<string> => await new Promise<string>((resolve, reject) => {
    get({ agent, host: '127.0.0.1', port: a.port, path: '/' }, res => {
      let body = ''
      res.on('data', (c: Buffer) => { body += c.toString() })
      res.on('end', () => { resolve(body) })
    }).on('error', reject)
  })
  t.same(await Promise.all([one(), one(), one(), one()]), ['sandbox-a', 'sandbox-a', 'sandbox-a', 'sandbox-a'], 'four new connections, all direct')
  t.equal(a.connections, 4)
  t.equal(h.asked.length, 3, 'one read before, then one after the first connect and one shared by the three others')
})

t.test('an app not listening on the address, no address or an engine failure: the relay, without an error', async t => {
  const relay = await app(t, 'relay', '127.0.0.1')
  const h = harness(t, relay.port)
  const free = await app(t, 'gone', '127.0.0.2')
  await close(free)
  h.set({ address: '127.0.0.2', generation: 'a/1' })
  t.equal(await h.fetchVia('chat-l', free.port), 'relay', 'refused (the app listens on loopback only): the relay')
  t.equal(h.asked.length, 1, 'no proof asked for a connection that was never made')
  t.equal(await h.fetchVia('chat-l', free.port), 'relay', 'asked again next time: the app may listen there later')

  h.set(null)
  t.equal(await h.fetchVia('chat-n', free.port), 'relay', 'the engine gives no address')
  const n = h.asked.length
  t.equal(await h.fetchVia('chat-n', free.port), 'relay')
  t.equal(h.asked.length, n, 'no address: not asked again for a while')

  h.set(Object.assign(new Error('engine busy'), { code: 'BUSY' }))
  t.equal(await h.fetchVia('chat-e', free.port), 'relay', 'an engine failure: the relay')

  const slowRelay = await app(t, 'relay', '127.0.0.1')
  const slowApp = await app(t, 'sandbox-slow', '127.0.0.2')
  const slow = harness(t, slowRelay.port, 1200)
  slow.set({ address: '127.0.0.2', generation: 's/1' })
  t.equal(await slow.fetchVia('chat-slow', slowApp.port), 'relay', 'an engine slower than a second: the relay, without waiting for it')

  // An app that resets the connection while the engine is asked: no crash, the relay.
  const resetter = createNetServer(socket => { setTimeout(() => { socket.resetAndDestroy() }, 20) })
  await new Promise<void>(resolve => resetter.listen(0, '127.0.0.2', resolve))
  t.teardown(() => { resetter.close() })
  const resetRelay = await app(t, 'relay', '127.0.0.1')
  const reset = harness(t, resetRelay.port, 100)
  reset.set({ address: '127.0.0.2', generation: 'r/1' })
  t.equal(await reset.fetchVia('chat-reset', (resetter.address() as AddressInfo).port), 'relay', 'reset during the proof: the relay, and the server lives on')

  h.set(Object.assign(new Error('not running'), { code: 'SANDBOX_NOT_RUNNING' }))
  await t.rejects(h.runtime.socket('chat-s', free.port), { code: 'PORTS_SANDBOX_NOT_RUNNING' }, 'a sandbox that is not running is reported as the relay would')
})

t.test('one chat\'s unreachable address never turns the route off for another; three chats\' in a row do', async t => {
  const target = await app(t, 'sandbox', '127.0.0.2')
  const answers: Record<string, AppAddress> = {}
  const sandbox = { appAddress: async (chat: string) => answers[chat] ?? null } as unknown as SandboxService
  const warnings: string[] = []
  const log = pino({ level: 'warn' }, { write: (line: string) => { warnings.push(line) } })
  // Connects to 127.0.0.3 time out (an app whose listen queue is full, or a firewall dropping replies).
  const route = createDirectRoute(sandbox, {
    connectTimeoutMs: 200,
    answerTimeoutMs: 1000,
    retryMs: 0,
    offMs: 60_000,
    log,
    dial: async (host, port, ms) => host === '127.0.0.3' ? 'ETIMEDOUT' : await dial(host, port, ms)
  })
  answers['chat-ok'] = { address: '127.0.0.2', generation: 'ok/1' }
  answers['chat-full'] = { address: '127.0.0.3', generation: 'full/1' }
  for (let i = 0; i < 5; i++) t.equal(await route.open('chat-full', target.port), undefined, `chat-full's connect ${i + 1} timed out: the relay`)
  const ok = await route.open('chat-ok', target.port)
  t.ok(ok !== undefined, 'another chat still takes the direct route')
  ok?.destroy()
  for (const chat of ['chat-x', 'chat-y', 'chat-z']) {
    answers[chat] = { address: '127.0.0.3', generation: `${chat}/1` }
    t.equal(await route.open(chat, target.port), undefined)
  }
  t.equal(await route.open('chat-ok', target.port), undefined, 'three chats\' addresses unreachable in a row: the route is off for everyone')
  t.equal(warnings.length, 1, 'said once, as a warning')
})
