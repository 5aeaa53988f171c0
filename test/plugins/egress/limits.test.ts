import t from 'tap'
import Fastify from 'fastify'
import { loadConfig } from '../../../core/config.js'
import { addressSet } from '../../../plugins/egress/addresses.js'
import { createEgressProxy } from '../../../plugins/egress/proxy.js'
import { parseRules } from '../../../plugins/egress/rules.js'
import { DEFAULT_BYTES_PER_SECOND } from '../../../plugins/egress/schemas.js'
import { createSlots } from '../../../plugins/egress/slots.js'
import { OPTS, tunnel, upstream, type Answer } from './harness.js'

// Connection limits shared by all chats, and the default per-chat bandwidth cap. Upstreams are this test's own, on loopback.

t.test('slots: per chat, total, and a reserve only chats holding few may use', async t => {
  const s = createSlots({ perChat: 10, total: 10, reserved: 4, reservedBelow: 2 })
  const a = Array.from({ length: 8 }, () => s.take('a'))
  t.same(a, [null, null, null, null, null, null, 'reserved', 'reserved'], 'a flooding chat gets the shared 6')
  t.same([s.take('b'), s.take('b'), s.take('b')], [null, null, 'reserved'], 'a quiet chat gets reserved slots while it holds fewer than 2')
  t.same([s.take('c'), s.take('c')], [null, null])
  t.equal(s.take('d'), 'total')
  s.release('a')
  t.equal(s.take('a'), 'reserved', 'with 9 taken the pool is in its reserve: not for a chat holding 5')
  t.equal(s.take('d'), null, 'but for a chat holding none')
  t.equal(s.taken(), 10)
  const p = createSlots({ perChat: 2, total: 100, reserved: 0, reservedBelow: 1 })
  t.same([p.take('x'), p.take('x'), p.take('x')], [null, null, 'chat'])
  p.release('x'); p.release('x'); p.release('x')
  t.equal(p.held('x'), 0)
  t.equal(p.taken(), 0, 'an extra release does not go below zero')
})

t.test('one chat cannot take every proxy connection: past the shared part it gets 503, another chat still connects', async t => {
  const canary = await upstream(t, 'canary')
  const chats: Record<string, string> = { '127.0.0.2': 'flood', '127.0.0.3': 'quiet' }
  const p = createEgressProxy({
    log: Fastify({ logger: false }).log,
    identify: a => chats[a] ?? null,
    policyFor: () => ({ mode: 'open', rules: parseRules(`127.0.0.1:${canary}`), hostAddresses: addressSet([]) }),
    lookup: async () => ['127.0.0.1'],
    record: () => {}
  }, { maxConnectionsPerChat: 10, maxConnections: 10, reservedConnections: 4, reservedBelow: 2, idleTimeoutMs: 5000, connectTimeoutMs: 2000, headTimeoutMs: 2000, bytesPerSecond: 0 })
  const port = await p.listen('127.0.0.1', 0)
  t.teardown(async () => { await p.close() })
  const open: Answer[] = []
  for (let i = 0; i < 10; i++) open.push(await tunnel(port, '127.0.0.2', `canary.test:${canary}`))
  t.same(open.map(a => a.status), [200, 200, 200, 200, 200, 200, 503, 503, 503, 503], 'the flooding chat holds 6 of 10')
  t.equal(open[6]?.message, 'egress proxy busy: the last 4 of 10 connections are kept for sandboxes holding fewer than 2, and this one holds 6')
  t.equal(p.open('flood'), 6)
  const quiet = await tunnel(port, '127.0.0.3', `canary.test:${canary}`)
  t.equal(quiet.status, 200, 'the other chat connects')
  quiet.socket.write('GET /quiet HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
  let body = ''
  for await (const c of quiet.socket) body += (c as Buffer).toString()
  t.match(body, /canary \/quiet/)
  for (const a of open) a.socket.destroy()
})

t.test('per-chat bandwidth is capped by default: 20 MiB/s for the setting and the plugin option (the bucket itself: proxy.test.ts)', async t => {
  t.equal(DEFAULT_BYTES_PER_SECOND, 20 * 1024 * 1024)
  t.equal(OPTS.maxBytesPerSecond, DEFAULT_BYTES_PER_SECOND, 'the plugin default')
  t.equal(loadConfig({}).EGRESS_MAX_BYTES_PER_SECOND, DEFAULT_BYTES_PER_SECOND, 'the setting default')
  t.equal(loadConfig({ EGRESS_MAX_BYTES_PER_SECOND: '0' }).EGRESS_MAX_BYTES_PER_SECOND, 0, '0 still turns it off')
})
