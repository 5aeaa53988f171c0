import t, { type Test } from 'tap'
import type { AddressInfo } from 'node:net'
import Fastify from 'fastify'
import { createChatStorage } from '../../../plugins/chat-storage/service.js'
import { createEgressService } from '../../../plugins/egress/service.js'
import { createOverrideStore } from '../../../plugins/egress/store.js'
import { OPTS, tunnel, upstream } from './harness.js'
import { tempDir } from '../../fixtures/temp-dir.js'

// A sandbox whose address the server learns before any call of its chat (re-adopted at boot, or
// published on the start path before onEnsure): the proxy listens for it and judges it by its chat's
// own override, never by the server's setting alone. Upstreams are this test's own, on loopback.

const LOOPBACK_NET = { name: 'test', gateway: '127.0.0.1', subnet: '127.0.0.0/8' }
/** canary.test is the test's own upstream on loopback: no DNS query leaves the machine */
const CANARY = async (): Promise<string[]> => ['127.0.0.1']

/** A server process's egress service over a data dir; the server setting lets every chat reach the canary. */
function server (t: Test, dir: string, canary: number, readDelayMs = 0): ReturnType<typeof createEgressService> {
  const log = Fastify({ logger: false }).log
  const store = createOverrideStore(createChatStorage({ dataDir: dir }), log)
  const slow: typeof store = {
    ...store,
    read: async chat => {
      await new Promise(resolve => setTimeout(resolve, readDelayMs))
      return await store.read(chat)
    }
  }
  const built = createEgressService({ sandbox: { network: () => LOOPBACK_NET, address: async () => null }, log, store: slow, firewall: false, lookup: CANARY }, { ...OPTS, port: 0, allow: `127.0.0.1:${canary}` })
  t.teardown(async () => { await built.close() })
  return built
}

async function listening (built: ReturnType<typeof createEgressService>): Promise<number | null> {
  const deadline = Date.now() + 5000
  while (Date.now() < deadline) {
    if (built.proxy.server.listening) return (built.proxy.server.address() as AddressInfo).port
    await new Promise(resolve => setTimeout(resolve, 20))
  }
  return null
}

t.test('re-adopted sandboxes, before any call: the proxy listens and each goes out under its own override', async t => {
  const canary = await upstream(t, 'canary')
  const dir = await tempDir(t, 'egress-readopt')
  const before = server(t, dir, canary)
  await before.service.setOverride('chat-off', { mode: 'off', allow: [] })
  await before.close()

  // A new server process: the sandbox driver re-adopts two running sandboxes and publishes their addresses.
  const after = server(t, dir, canary, 200)
  after.assign('chat-off', '127.0.0.2')
  after.assign('chat-open', '127.0.0.3')
  const port = await listening(after)
  t.not(port, null, 'the proxy listens without waiting for a call')
  if (port === null) return
  const open = await tunnel(port, '127.0.0.3', `canary.test:${canary}`)
  t.equal(open.status, 200, 'a chat without an override goes out by the server setting')
  open.socket.destroy()
  const off = await tunnel(port, '127.0.0.2', `canary.test:${canary}`)
  t.equal(off.status, 403, 'the chat whose override turns egress off is refused, though its override was still being read')
  off.socket.destroy()
})

t.test('a restarted sandbox whose address comes before onEnsure is judged by its override from its first connection', async t => {
  const canary = await upstream(t, 'canary')
  const dir = await tempDir(t, 'egress-readopt')
  const first = server(t, dir, canary)
  await first.service.setOverride('chat-strict', { mode: 'off', allow: [] })
  await first.close()

  const built = server(t, dir, canary, 300)
  // Another chat's sandbox started first: the proxy is already listening.
  await built.attach('chat-other', { started: true })
  const port = (built.proxy.server.address() as AddressInfo).port
  built.assign('chat-strict', '127.0.0.4')
  const answer = await tunnel(port, '127.0.0.4', `canary.test:${canary}`)
  t.equal(answer.status, 403, 'not let through by the server setting while the override loads')
  answer.socket.destroy()
  t.match(await built.service.effective('chat-strict'), { mode: 'off', source: 'chat' })
})

t.test('an override that cannot be read unmaps the address: refused as unknown until the chat\'s next call', async t => {
  const canary = await upstream(t, 'canary')
  const dir = await tempDir(t, 'egress-readopt')
  const log = Fastify({ logger: false }).log
  const store = createOverrideStore(createChatStorage({ dataDir: dir }), log)
  const failing: typeof store = { ...store, read: async () => { throw new Error('disk gone') } }
  const built = createEgressService({ sandbox: { network: () => LOOPBACK_NET, address: async () => null }, log, store: failing, firewall: false, lookup: CANARY }, { ...OPTS, port: 0, allow: `127.0.0.1:${canary}` })
  t.teardown(async () => { await built.close() })
  built.assign('chat-broken', '127.0.0.5')
  const port = await listening(built)
  if (port === null) { t.fail('the proxy listens'); return }
  const answer = await tunnel(port, '127.0.0.5', `canary.test:${canary}`)
  t.equal(answer.status, 403)
  t.match(answer.message, /not a running sandbox/)
  answer.socket.destroy()
})
