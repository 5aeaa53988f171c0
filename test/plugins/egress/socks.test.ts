import t from 'tap'
import type { Test } from 'tap'
import { connect as netConnect, isIP, type AddressInfo, type Socket } from 'node:net'
import http from 'node:http'
import Fastify from 'fastify'
import { addressSet } from '../../../plugins/egress/addresses.js'
import { createEgressProxy } from '../../../plugins/egress/proxy.js'
import { parseRules } from '../../../plugins/egress/rules.js'
import { parseSocks } from '../../../plugins/egress/socks.js'
import type { ConnectionRecord } from '../../../plugins/egress/types.js'

// SOCKS5 CONNECT on the proxy's port, on the same policy path; BIND and UDP ASSOCIATE refused. Loopback only.

async function setup (t: Test) {
  const server = http.createServer((req, res) => { res.end(`canary ${req.url ?? ''}`) })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.closeAllConnections(); server.close() })
  const canary = (server.address() as AddressInfo).port
  const log: ConnectionRecord[] = []
  const p = createEgressProxy({
    log: Fastify({ logger: false }).log,
    identify: a => a === '127.0.0.1' ? 'chat-a' : null,
    policyFor: () => ({ mode: 'open', rules: parseRules(`127.0.0.1:${canary}`), hostAddresses: addressSet([]) }),
    lookup: async host => {
      if (isIP(host) !== 0) return [host] // as the system resolver answers a literal
      if (host === 'canary.test') return ['127.0.0.1']
      if (host === 'private.test') return ['10.0.0.9']
      throw Object.assign(new Error('nx'), { code: 'ENOTFOUND' })
    },
    record: (_chat, r) => { log.push(r) }
  }, { maxConnectionsPerChat: 8, maxConnections: 100, idleTimeoutMs: 2000, connectTimeoutMs: 2000, headTimeoutMs: 1000, bytesPerSecond: 0 })
  const port = await p.listen('127.0.0.1', 0)
  t.teardown(async () => { await p.close() })
  return { port, canary, log }
}

/** A raw SOCKS5 client: sends the greeting, then the request once the method is chosen; resolves with what came back. */
async function socks (port: number, greeting: number[], request: Buffer, then?: string): Promise<{ method: Buffer, reply: Buffer, rest: string }> {
  const s: Socket = netConnect(port, '127.0.0.1')
  const got: Buffer[] = []
  s.on('data', (c: Buffer) => {
    got.push(c)
    const all = Buffer.concat(got)
    if (all.length === 2 && all[1] === 0x00) s.write(request)
    if (all.length >= 12 && then !== undefined && all[3] === 0x00) { s.write(then); then = undefined }
  })
  s.write(Buffer.from(greeting))
  await new Promise(resolve => { s.on('close', resolve); s.on('error', resolve) })
  const all = Buffer.concat(got)
  return { method: all.subarray(0, 2), reply: all.subarray(2, 12), rest: all.subarray(12).toString() }
}

const domain = (name: string, port: number): Buffer => Buffer.concat([Buffer.from([5, 1, 0, 3, name.length]), Buffer.from(name), Buffer.from([port >> 8, port & 255])])
const ipv4 = (ip: number[], port: number, cmd = 1): Buffer => Buffer.from([5, cmd, 0, 1, ...ip, port >> 8, port & 255])
const ipv6 = (bytes: number[], port: number): Buffer => Buffer.from([5, 1, 0, 4, ...bytes, port >> 8, port & 255])
const GET = 'GET /via-socks HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'

t.test('CONNECT by domain name and by IPv4 reaches an allowed upstream through the policy', async t => {
  const { port, canary, log } = await setup(t)
  const byName = await socks(port, [5, 1, 0], domain('canary.test', canary), GET)
  t.same([...byName.method], [5, 0], 'no authentication chosen')
  t.equal(byName.reply[1], 0x00, 'succeeded')
  t.match(byName.rest, /canary \/via-socks/)
  const byIp = await socks(port, [5, 2, 2, 0], ipv4([127, 0, 0, 1], canary), GET)
  t.equal(byIp.reply[1], 0x00)
  t.match(log.find(r => r.host === 'canary.test'), { method: 'SOCKS5', decision: 'allowed', reason: 'rule', address: '127.0.0.1' })
  t.ok((log.find(r => r.host === 'canary.test')?.bytesDown ?? 0) > 0, 'bytes counted')
})

t.test('refusals come back as SOCKS5 reply codes and are logged with the policy message', async t => {
  const { port, canary, log } = await setup(t)
  t.equal((await socks(port, [5, 1, 0], domain('canary.test', canary + 1))).reply[1], 0x02, 'another loopback port: not allowed by ruleset')
  t.equal((await socks(port, [5, 1, 0], domain('private.test', 80))).reply[1], 0x02, 'a name resolving to a private address')
  t.equal((await socks(port, [5, 1, 0], ipv6([...Array(15).fill(0), 1], 80))).reply[1], 0x02, 'IPv6 ::1')
  t.equal((await socks(port, [5, 1, 0], domain('nowhere.test', 80))).reply[1], 0x04, 'DNS failure: host unreachable')
  t.match(log.find(r => r.host === 'private.test'), { method: 'SOCKS5', decision: 'denied', message: /private\.test \(10\.0\.0\.9\) is a private address/ })
  t.match(log.find(r => r.host === '::1'), { decision: 'denied', message: /::1 is a loopback address/ })
})

t.test('BIND and UDP ASSOCIATE are refused as unsupported; a client offering only authentication gets no method', async t => {
  const { port, log } = await setup(t)
  t.equal((await socks(port, [5, 1, 0], ipv4([127, 0, 0, 1], 80, 2))).reply[1], 0x07, 'BIND')
  t.equal((await socks(port, [5, 1, 0], ipv4([0, 0, 0, 0], 0, 3))).reply[1], 0x07, 'UDP ASSOCIATE')
  t.match(log.filter(r => r.reason === 'socks').map(r => r.message), [/BIND is not supported/, /UDP ASSOCIATE is not supported/])
  const auth = await socks(port, [5, 1, 2], Buffer.alloc(0))
  t.same([...auth.method], [5, 0xff], 'no acceptable method')
})

t.test('the parser waits for complete messages and bounds its input', async t => {
  t.same(parseSocks(Buffer.from([5])), { state: 'more' })
  t.same(parseSocks(Buffer.from([5, 1, 0, 5, 1, 0, 3, 10, 0x61])), { state: 'more' }, 'a name cut short')
  t.match(parseSocks(Buffer.from([5, 1, 0, 5, 1, 0, 9, 0, 0])), { state: 'error', reply: 0x08 }, 'unknown address type')
  t.match(parseSocks(Buffer.from([5, 1, 0, 5, 1, 0, 3, 0, 0, 80])), { state: 'error', reply: 0x08 }, 'empty name')
  t.match(parseSocks(Buffer.from([5, 1, 0, 5, 1, 0, 1, 1, 2, 3, 4, 0, 0])), { state: 'error', message: /port 0/ })
  t.match(parseSocks(Buffer.concat([Buffer.from([5, 1, 0]), ipv6([0x20, 1, 0xd, 0xb8, ...Array(11).fill(0), 5], 443)])), { state: 'done', host: '2001:db8::5', port: 443 })
})
