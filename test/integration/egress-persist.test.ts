/*
 * Per-user defaults and persisted per-chat overrides on a real engine (docs/contract.md#egress): the user default
 * (EGRESS_USERS) decides a chat without an override; an override set through the API survives a
 * server restart and decides the next connection; clearing it brings the user default back.
 * Traffic goes only to a server this test starts on loopback.
 */
import t from 'tap'
import http from 'node:http'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { AddressInfo } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { buildApp, entry } from '../../core/app.js'
import { entries } from '../../fastify.config.js'
import egress from '../../plugins/egress/index.js'
import type { RequestUser } from '../../core/identity.js'
import { testConfig, TEST_API_KEY } from '../helper.js'
import { cleanupPrefix, dockerOrSkip, TEST_IMAGE, removeNetworkFirewall } from './docker.js'
import { tempDir } from '../fixtures/temp-dir.js'
import { nameLookup } from '../fixtures/name-lookup.js'

const PREFIX = 'tegrpers'
const CHAT = 'egress-persist'
const { skip } = await dockerOrSkip()
const ALICE: RequestUser = { email: 'alice@example.com', emailRejected: false, mcpServers: [], credentials: {} }

t.test('user defaults and overrides that survive a restart (real Docker)', { skip }, async t => {
  await cleanupPrefix(t, PREFIX)
  let hits = 0
  const server = http.createServer((_req, res) => { hits++; res.end('hello from canary\n') })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.closeAllConnections(); server.close() })
  const port = (server.address() as AddressInfo).port
  const dataDir = await tempDir(t, `${PREFIX}-data`)
  // The server's setting (open, no rules) refuses the loopback canary; alice's default allows it.
  const usersFile = join(dataDir, 'egress-users.json')
  await writeFile(usersFile, JSON.stringify({ 'alice@example.com': { mode: 'allowlist', allow: [`127.0.0.1:${port}`] } }))
  const config = testConfig({ SANDBOX_PREFIX: PREFIX, DATA_DIR: dataDir, MCP_API_KEY: TEST_API_KEY, DOCKER_IMAGE: TEST_IMAGE, EGRESS_USERS: usersFile })
  const auth = { authorization: `Bearer ${TEST_API_KEY}` }
  let app: FastifyInstance | null = null
  const start = async (): Promise<FastifyInstance> => {
    const next = await buildApp(config, [
      ...entries(config, ['capabilities', 'chat-storage', 'sandbox-docker', 'sandbox']),
      entry(egress, {
        users: usersFile,
        lookup: nameLookup({ 'canary.test': ['127.0.0.1'] })
      })
    ], { logger: process.env.TEST_LOG === '1' ? { level: 'debug' } : false })
    await next.ready()
    app = next
    return next
  }
  t.teardown(async () => {
    const net = app?.sandbox.network?.()
    await app?.close()
    if (net != null) await removeNetworkFirewall(net.name)
  })
  const curl = async (a: FastifyInstance, path: string): Promise<string> => {
    await a.sandbox.ensure(CHAT, { user: ALICE })
    const r = await a.sandbox.exec(CHAT, ['bash', '-c', `curl -sS -m 20 http://canary.test:${port}${path}`], { timeoutMs: 60_000 })
    return r.stdout.toString() + r.stderr.toString()
  }

  const first = await start()
  t.equal(await curl(first, '/user-default'), 'hello from canary\n', 'the user default allows the canary')
  t.match((await first.inject({ method: 'GET', url: `/api/egress/${CHAT}`, headers: auth })).json(), {
    mode: 'allowlist', source: 'user', user: { email: 'alice@example.com', mode: 'allowlist' }, override: null
  })
  const put = await first.inject({ method: 'PUT', url: `/api/egress/${CHAT}`, headers: auth, payload: { mode: 'off' } })
  t.match(put.json(), { mode: 'off', source: 'chat' })
  t.match(await curl(first, '/after-override'), /egress is switched off for this sandbox/)

  await first.close() // a server restart; the sandbox and the data dir stay
  app = null
  const second = await start()
  t.match(await curl(second, '/after-restart'), /egress is switched off for this sandbox/, 'the stored override decides the first connection after the restart')
  t.match((await second.inject({ method: 'GET', url: `/api/egress/${CHAT}`, headers: auth })).json(), { mode: 'off', source: 'chat', override: { mode: 'off' } })
  const cleared = await second.inject({ method: 'DELETE', url: `/api/egress/${CHAT}`, headers: auth })
  t.match(cleared.json(), { mode: 'allowlist', source: 'user', override: null })
  t.equal(await curl(second, '/cleared'), 'hello from canary\n', 'the user default again')
  t.equal(hits, 2, 'the canary saw exactly the two allowed requests')
})
