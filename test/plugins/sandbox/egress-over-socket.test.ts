/*
 * The core's side of egress over the agent socket (docs/network.md#egress-over-the-agent-socket), on the
 * in-memory engine given a serveEgress capability: sandboxes are created without a network and with
 * CUBICLE_EGRESS_PORT, no network is prepared, and a connection reaches the egress side with the chat whose
 * sandbox it came from; one from a sandbox no chat holds is closed. Without the capability nothing changes.
 */
import t, { type Test } from 'tap'
import fp from 'fastify-plugin'
import { PassThrough } from 'node:stream'
import type { Socket } from 'node:net'
import { buildApp, entry } from '../../../core/app.js'
import { loadConfig } from '../../../core/config.js'
import sandbox from '../../../plugins/sandbox/index.js'
import chatStorage from '../../../plugins/chat-storage/index.js'
import sandboxMemory from '../../../plugins/sandbox-memory/index.js'
import { createMemoryEngine } from '../../../plugins/sandbox-memory/memory-engine.js'
import { tempDir } from '../../fixtures/temp-dir.js'

const IMAGE = 'cubicle-memory-test:latest'

async function setup (t: Test, capable: boolean): Promise<{
  app: Awaited<ReturnType<typeof buildApp>>
  engine: ReturnType<typeof createMemoryEngine>
  deliver: ((id: string, socket: Socket) => void) | null
  served: Array<{ chatId: string }>
  offered: { value: boolean | undefined }
}> {
  const dir = await tempDir(t, 'egress-core')
  const memory = createMemoryEngine({ images: [IMAGE] })
  const state = { deliver: null as ((id: string, socket: Socket) => void) | null }
  const engine = capable ? Object.assign(memory, { serveEgress: (h: (id: string, socket: Socket) => void) => { state.deliver = h } }) : memory
  const served: Array<{ chatId: string }> = []
  const offered: { value: boolean | undefined } = { value: undefined }
  const app = await buildApp(loadConfig({ DATA_DIR: dir, LOG_LEVEL: 'silent' }), [
    entry(chatStorage, { dataDir: dir }),
    entry(sandboxMemory, { client: engine }),
    entry(sandbox, { image: IMAGE, prefix: 'egc', dataDir: dir, enableNetwork: true, agent: false }),
    entry(fp(async f => { offered.value = f.sandbox.egressOverSocket?.(3128, chatId => { served.push({ chatId }) }) }, { name: 'egress-stand-in' }), {})
  ], { logger: false })
  t.teardown(async () => { await app.close() })
  await app.ready()
  return { app, engine: memory, get deliver () { return state.deliver }, served, offered }
}

t.test('with the capability: no network, the port in the environment, each connection with its sandbox\'s chat', async t => {
  const s = await setup(t, true)
  t.equal(s.offered.value, true, 'egressOverSocket says the engine serves it')
  await s.app.sandbox.ensure('chat-a')
  await s.app.sandbox.ensure('chat-b')
  const boxes = [...s.engine.sandboxes.values()]
  t.same(boxes.map(b => b.spec.network), ['none', 'none'], 'created without a network')
  t.ok(boxes.every(b => b.spec.env.includes('CUBICLE_EGRESS_PORT=3128')), 'the agent is told the port')
  t.equal(s.app.sandbox.network?.() ?? null, null, 'no network prepared')
  t.same(await s.engine.listNetworks([]), [], 'the engine made none')
  for (const box of boxes) s.deliver?.(box.id, new PassThrough() as unknown as Socket)
  t.same(s.served.map(x => x.chatId).sort(), ['chat-a', 'chat-b'], 'each connection goes with the chat holding its sandbox')
  const stray = new PassThrough() as unknown as Socket
  s.deliver?.('no-such-sandbox', stray)
  t.equal(s.served.length, 2, 'a sandbox no chat holds is not served')
  t.ok(stray.destroyed, 'its connection is closed')
})

t.test('without the capability: the network path as before', async t => {
  const s = await setup(t, false)
  t.equal(s.offered.value, false)
  await s.app.sandbox.ensure('chat-a')
  const [box] = [...s.engine.sandboxes.values()]
  t.same((await s.engine.listNetworks([])).map(n => n.name), ['egc-sandboxes'], 'the network is prepared at boot (the in-memory one reports no gateway, so its sandboxes get none)')
  t.notOk(box?.spec.env.some(e => e.startsWith('CUBICLE_EGRESS_PORT=')), 'no relay port')
})
