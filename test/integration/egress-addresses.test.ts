/*
 * The egress proxy knows which chat a connection comes from by the sandbox's address, and a sandbox
 * started again may get another address (Docker hands freed addresses to whichever sandbox starts
 * next). The driver publishes the address a start gave before ensure() resolves, so the first command
 * of every start reaches the network under its own chat's policy. Real Docker; traffic only to a
 * server this test starts on loopback.
 */
import t from 'tap'
import type { Test } from 'tap'
import http from 'node:http'
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { AddressInfo } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { buildApp, entry } from '../../core/app.js'
import { loadConfig } from '../../core/config.js'
import sandboxDocker from '../../plugins/sandbox-docker/index.js'
import sandbox from '../../plugins/sandbox/index.js'
import egress from '../../plugins/egress/index.js'
import chatStorage from '../../plugins/chat-storage/index.js'
import type { CoreSandboxService } from '../../plugins/sandbox/service.js'
import { sandboxNames } from '../../plugins/sandbox/names.js'
import { cleanupPrefix, DOCKER_HOST, dockerOrSkip, TEST_IMAGE, testDockerClient } from './docker.js'
import { pollUntil } from '../fixtures/poll.js'
import { nameLookup } from '../fixtures/name-lookup.js'

const PREFIX = 'tegaddr'
const { skip } = await dockerOrSkip()

async function canary (t: Test): Promise<{ port: number, seen: string[] }> {
  const seen: string[] = []
  const server = http.createServer((req, res) => { seen.push(req.url ?? ''); res.end('hello from the canary\n') })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.closeAllConnections(); server.close() })
  return { port: (server.address() as AddressInfo).port, seen }
}

interface Server { app: FastifyInstance, service: CoreSandboxService, close: () => Promise<void> }

async function server (dir: string, port: number, clock: { now: number }, extra: Record<string, unknown> = {}, prefix = PREFIX): Promise<Server> {
  const config = loadConfig({ DOCKER_IMAGE: TEST_IMAGE, LOG_LEVEL: 'silent', DATA_DIR: dir, SANDBOX_PREFIX: prefix, SANDBOX_POOL_SIZE: '0' })
  const app = await buildApp(config, [
    entry(sandboxDocker, { dockerHost: DOCKER_HOST, dataDir: dir }),
    entry(chatStorage, { dataDir: dir }),
    entry(sandbox, { image: TEST_IMAGE, prefix, dataDir: dir, memLimit: 256 * 1024 * 1024, poolSize: 0, now: () => clock.now, ...extra }),
    entry(egress, {
      allow: `127.0.0.1:${port}`,
      firewall: false,
      lookup: nameLookup({ 'canary.test': ['127.0.0.1'] })
    })
  ], { logger: process.env.TEST_LOG === '1' ? { level: 'debug' } : false })
  await app.ready()
  let closed = false
  return { app, service: app.sandbox as CoreSandboxService, close: async () => { if (!closed) { closed = true; await app.close() } } }
}

/** One curl through the proxy from the chat's sandbox: the body (or curl's error), and whether the chat's own log got it. */
async function fetchFrom (s: Server, chat: string, port: number, tag: string): Promise<{ out: string, logged: boolean }> {
  const allowed = (): number => s.app.egress.connections(chat).filter(c => c.host === 'canary.test' && c.decision === 'allowed').length
  const before = allowed()
  const r = await s.app.sandbox.exec(chat, ['bash', '-c', `curl -sS -m 20 http://canary.test:${port}/${tag} 2>&1`], { timeoutMs: 60_000 })
  // The proxy records a connection when it ends, which may be just after curl exits (at most 20 s on a busy host;
  // every caller expects it logged, so the bound costs nothing when it is).
  const count = await pollUntil(allowed, n => n !== before, 20_000, 50)
  return { out: r.stdout.toString() + r.stderr.toString(), logged: count === before + 1 }
}

t.test('the first command of a started sandbox goes out under its own chat (real Docker)', { skip }, async t => {
  await cleanupPrefix(t, PREFIX)
  const target = await canary(t)
  const dir = await mkdtemp(join(tmpdir(), `${PREFIX}-data-`))
  const clock = { now: Date.now() }
  let s = await server(dir, target.port, clock)
  t.teardown(async () => { await s.close() })
  const chats = ['addr-a', 'addr-b', 'addr-c']
  const before: Record<string, string | null> = {}
  for (const chat of chats) {
    await s.app.sandbox.ensure(chat)
    before[chat] = await s.app.sandbox.address!(chat)
    t.equal((await fetchFrom(s, chat, target.port, `first-${chat}`)).out, 'hello from the canary\n', `${chat} reaches the canary`)
  }

  t.test('three chats idle-stopped and woken in another order: every first command goes out', async t => {
    // Idle: paused at the first pass, stopped CONTAINER_PAUSED_TIMEOUT (1 h) later.
    clock.now += 3600_000
    await s.service.reap()
    clock.now += 3600_000
    await s.service.reap()
    for (const chat of chats) t.equal((await s.app.sandbox.status(chat)).state, 'stopped', `${chat} was idle-stopped`)
    const after: Record<string, string | null> = {}
    for (const chat of [...chats].reverse()) {
      await s.app.sandbox.ensure(chat)
      after[chat] = await s.app.sandbox.address!(chat)
      const first = await fetchFrom(s, chat, target.port, `woken-${chat}`)
      t.equal(first.out, 'hello from the canary\n', `${chat}'s first command after the wake reaches the canary`)
      t.ok(first.logged, `${chat}'s connection is in ${chat}'s own log`)
    }
    t.ok(chats.some(c => after[c] !== before[c]), `at least one address changed (${JSON.stringify(before)} -> ${JSON.stringify(after)})`)
    const fresh = testDockerClient()
    t.teardown(() => { fresh.close() })
    for (const chat of chats) {
      const d = await fresh.inspect(sandboxNames(PREFIX, chat).container)
      t.equal(after[chat], d?.addresses[`${PREFIX}-sandboxes`], `${chat}: the published address is the one Docker reports`)
    }
  })

  t.test('an outside docker stop: the freed address goes to another chat, never to the old one; the stopped chat comes back with egress', async t => {
    const docker = testDockerClient()
    t.teardown(() => { docker.close() })
    const victim = 'addr-a'
    const old = await s.app.sandbox.address!(victim)
    await docker.stop(sandboxNames(PREFIX, victim).container, 0)
    // A new chat started now takes the lowest free address: the one the stopped sandbox had.
    await s.app.sandbox.ensure('addr-d')
    const taken = await s.app.sandbox.address!('addr-d')
    t.equal(taken, old, 'the new chat got the address the stopped sandbox had')
    const victimLog = s.app.egress.connections(victim).length
    const d = await fetchFrom(s, 'addr-d', target.port, 'new-chat')
    t.equal(d.out, 'hello from the canary\n')
    t.ok(d.logged, 'the connection is the new chat\'s')
    t.equal(s.app.egress.connections(victim).length, victimLog, 'nothing was attributed to the chat that had the address before')
    // The stopped chat's next command starts it again (recovery) and goes out at once.
    const back = await fetchFrom(s, victim, target.port, 'recovered')
    t.equal(back.out, 'hello from the canary\n', 'the restarted chat\'s first command reaches the canary')
    t.not(await s.app.sandbox.address!(victim), old, 'it came back on another address')
  })

  t.test('re-adoption at boot: a new server maps running sandboxes before any ensure of theirs', async t => {
    await s.close()
    s = await server(dir, target.port, clock)
    // One chat's call binds the proxy; the other re-adopted sandbox has had no ensure at all.
    await s.app.sandbox.ensure('addr-b')
    const c = await fetchFrom(s, 'addr-c', target.port, 'readopted')
    t.equal(c.out, 'hello from the canary\n', 'a re-adopted sandbox goes out before any call of its chat')
    t.ok(c.logged, 'under its own chat')
    const b = await fetchFrom(s, 'addr-b', target.port, 'after-reboot')
    t.equal(b.out, 'hello from the canary\n')
    t.ok(b.logged)
  })
})

t.test('a sandbox claimed from the warm pool goes out from its first command (real Docker)', { skip }, async t => {
  const prefix = `${PREFIX}p`
  await cleanupPrefix(t, prefix)
  const target = await canary(t)
  const dir = await mkdtemp(join(tmpdir(), `${prefix}-data-`))
  const s = await server(dir, target.port, { now: Date.now() }, { poolSize: 1 }, prefix)
  t.teardown(async () => { await s.close() })
  const until = Date.now() + 60_000
  while (s.service.pooled() < 1 && Date.now() < until) await new Promise(resolve => setTimeout(resolve, 200))
  t.equal(s.service.pooled(), 1, 'one pool sandbox is ready')
  await s.app.sandbox.ensure('pool-chat')
  t.equal(s.service.pooled(), 0, 'the chat claimed it')
  const r = await fetchFrom(s, 'pool-chat', target.port, 'claimed')
  t.equal(r.out, 'hello from the canary\n')
  t.ok(r.logged)
})
