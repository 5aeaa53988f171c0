// The direct route to an app on real Docker (docs/features.md#the-direct-route), with the egress plugin and its
// firewall as in production: an app listening on 0.0.0.0 is reached on the sandbox's own address (it sees
// the server's gateway address as its peer), one on 127.0.0.1 through the agent's relay (it sees loopback);
// WebSockets the same; an app that rebinds to loopback keeps working; after a stop and a start the new
// address is used, and a sandbox of another chat that may hold the old one never gets a connection; the
// sandbox still cannot open a connection to the host beyond the egress proxy.
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:http'
import { execFileSync } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { AddressInfo } from 'node:net'
import WebSocket from 'ws'
import { entries } from '../../fastify.config.js'
import { build, freePort, TEST_API_KEY } from '../helper.js'
import { bash, mcpClient } from './browser-app.js'
import { startApp } from '../fixtures/web-app.js'
import { bridgeOf, dockerOrSkip, removeByPrefix, TEST_IMAGE } from './docker.js'
import { chainName, removeFirewall } from '../../plugins/sandbox-docker/docker-firewall.js'

const gate = await dockerOrSkip()

t.test('apps beyond loopback are reached on the sandbox\'s address, the others through the relay', gate, async t => {
  const prefix = `dr-${randomBytes(4).toString('hex')}`
  const dataDir = await mkdtemp(join(tmpdir(), `${prefix}-data-`))
  const made = { bridge: '' }
  t.teardown(async () => {
    if (made.bridge !== '') await removeFirewall(made.bridge)
    await removeByPrefix(prefix)
    await rm(dataDir, { recursive: true, force: true })
  })
  // A host service on every interface, as the server's own port would be: the sandbox must not reach it.
  const hostService = createServer((_req, res) => { res.end('host service') })
  await new Promise<void>(resolve => hostService.listen(0, '0.0.0.0', resolve))
  t.teardown(() => { hostService.close() })
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  // SANDBOX_EGRESS_SOCKET=false: the direct route needs the sandbox's address on the network (docs/features.md#the-direct-route).
  const app = await build(t, {
    SANDBOX_PREFIX: prefix, DATA_DIR: dataDir, DOCKER_IMAGE: TEST_IMAGE, MCP_API_KEY: TEST_API_KEY, PUBLIC_BASE_URL: url, COMMAND_TIMEOUT: '120', EGRESS_PORT: String(await freePort()), SANDBOX_EGRESS_SOCKET: 'false'
  }, config => entries(config, ['chat-storage', 'mcp-transport', 'capabilities', 'sandbox-docker', 'sandbox', 'workspace-tools', 'egress', 'ports']))
  await app.listen({ port, host: '127.0.0.1' })
  const a = await mcpClient(t, url, 'direct-a')
  t.match(await bash(a, `${startApp(3000)}; ${startApp(3001, '127.0.0.1')}; echo A > ~/app/who`), /started[\s\S]*started/)
  const net = app.sandbox.network?.()
  if (net == null) throw new Error('no sandbox network')
  const bridge = made.bridge = await bridgeOf(net.name)
  const gateway = net.gateway
  const cookieOf = (chat: string): Record<string, string> => ({ Cookie: `cubicle_app=${app.links.token(chat, 'c') as string}` })
  const get = async (chat: string, p: number, path: string): Promise<string> => {
    const res = await fetch(`${url}/apps/${chat}/${p}${path}`, { headers: cookieOf(chat) })
    t.equal(res.status, 200, `${chat} ${p}${path}`)
    return await res.text()
  }
  const peer = async (p: number): Promise<string> => (JSON.parse(await get('direct-a', p, '/headers')) as { peer: string }).peer
  const wsPeer = async (p: number): Promise<string> => {
    const ws = new WebSocket(`${url.replace('http:', 'ws:')}/apps/direct-a/${p}/ws`, { headers: cookieOf('direct-a') })
    try {
      await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject) })
      ws.send('peer')
      return String(await new Promise(resolve => ws.once('message', resolve)))
    } finally { ws.close() }
  }

  t.equal(await peer(3000), gateway, 'an app on 0.0.0.0 is reached directly: its peer is the server on the sandbox network')
  t.equal(await peer(3001), '127.0.0.1', 'an app on 127.0.0.1 only: through the relay')
  t.equal(await wsPeer(3000), `peer:${gateway}`, 'a WebSocket to the app on 0.0.0.0: direct')
  t.equal(await wsPeer(3001), 'peer:127.0.0.1', 'a WebSocket to the app on loopback: the relay')
  t.equal(await get('direct-a', 3000, '/who'), 'A\n')

  // The firewall (root only): replies to the server's connections pass; the sandbox opens nothing but the proxy.
  if (process.getuid?.() === 0) {
    const rules = execFileSync('iptables', ['-w', '5', '-S', chainName(bridge)], { encoding: 'utf8' })
    t.match(rules, /--ctstate ESTABLISHED --ctdir REPLY -j ACCEPT/, 'the reply rule is installed')
    const hostPort = (hostService.address() as AddressInfo).port
    const r = await app.sandbox.exec('direct-a', ['bash', '-c', `curl -sS -m 5 --noproxy '*' http://${gateway}:${hostPort}/ 2>&1; echo "exit=$?"`], { timeoutMs: 30_000 })
    t.notMatch(r.stdout.toString(), /host service/, 'the sandbox cannot open a connection to a host service')
    t.match(r.stdout.toString(), /exit=(7|28)\b/)
  } else t.comment('not root: the firewall was not checked')

  // The app rebinds to loopback: the direct connect is refused, the relay serves, without an error.
  await bash(a, `kill $(pgrep -f '^node server.js 3000 ') && sleep 0.3; ${startApp(3000, '127.0.0.1')}`)
  t.equal(await peer(3000), '127.0.0.1', 'rebound to 127.0.0.1: the relay')
  await bash(a, `kill $(pgrep -f '^node server.js 3000 ') && sleep 0.3; ${startApp(3000)}`)
  t.equal(await peer(3000), gateway, 'back on 0.0.0.0: direct again')

  // A stop, another chat's sandbox started meanwhile (Docker may give it the stopped sandbox's address),
  // then the start again: the new address is used, the other sandbox never sees the server.
  const before = await app.sandbox.address?.('direct-a')
  await app.sandbox.stop('direct-a')
  const b = await mcpClient(t, url, 'direct-b')
  await bash(b, `${startApp(3000)}; echo B > ~/app/who`)
  const addressB = await app.sandbox.address?.('direct-b')
  t.comment(`A's address before the stop ${before ?? '?'}, B's ${addressB ?? '?'}`)
  await bash(a, `${startApp(3000)}; echo A > ~/app/who`)
  const after = await app.sandbox.address?.('direct-a')
  t.comment(`A's address after the start ${after ?? '?'}`)
  t.equal(await get('direct-a', 3000, '/who'), 'A\n', 'chat A\'s app answers chat A\'s URL')
  t.equal(await peer(3000), gateway, 'directly')
  const peersB = JSON.parse(/^PEERS=(.*)$/m.exec(await bash(b, 'echo "PEERS=$(curl -fsS http://127.0.0.1:3000/peers)"'))?.[1] ?? 'null') as string[]
  t.notOk(peersB.includes(gateway), 'chat B\'s sandbox never got a connection from the server')
  t.equal(await get('direct-b', 3000, '/who'), 'B\n', 'chat B\'s own URL reaches chat B')
})
