/*
 * Sandbox egress on a real engine (docs/contract.md#egress): the sandbox network has no route out, the only way out
 * is the server's policy proxy. Traffic goes only to servers this test starts on this machine.
 */
import t from 'tap'
import type { Test } from 'tap'
import http from 'node:http'
import { mkdtemp } from 'node:fs/promises'
import { networkInterfaces, tmpdir } from 'node:os'
import { join } from 'node:path'
import type { AddressInfo } from 'node:net'
import { buildApp, entry } from '../../core/app.js'
import { loadConfig } from '../../core/config.js'
import sandboxDocker from '../../plugins/sandbox-docker/index.js'
import sandbox from '../../plugins/sandbox/index.js'
import egress from '../../plugins/egress/index.js'
import chatStorage from '../../plugins/chat-storage/index.js'
import { TEST_API_KEY } from '../helper.js'
import { cleanupPrefix, DOCKER_HOST, dockerOrSkip, TEST_IMAGE, removeNetworkFirewall } from './docker.js'
import { nameLookup } from '../fixtures/name-lookup.js'

const PREFIX = 'tegress'
const CHAT = 'egress-a'
const { skip } = await dockerOrSkip()

interface Seen { url: string, ua: string }

async function canary (t: Test, name: string, host = '127.0.0.1'): Promise<{ port: number, seen: Seen[] }> {
  const seen: Seen[] = []
  const server = http.createServer((req, res) => {
    seen.push({ url: req.url ?? '', ua: req.headers['user-agent'] ?? '' })
    res.end(`hello from ${name}\n`)
  })
  await new Promise<void>(resolve => server.listen(0, host, resolve))
  t.teardown(() => { server.closeAllConnections(); server.close() })
  return { port: (server.address() as AddressInfo).port, seen }
}

t.test('sandbox egress through the policy proxy (real Docker)', { skip }, async t => {
  await cleanupPrefix(t, PREFIX)
  const a = await canary(t, 'canary-a')
  const b = await canary(t, 'canary-b')
  // A host service on every interface, as the server's own port would be.
  const hostService = await canary(t, 'host-service', '0.0.0.0')
  const dir = await mkdtemp(join(tmpdir(), `${PREFIX}-data-`))
  const config = loadConfig({ DOCKER_IMAGE: TEST_IMAGE, LOG_LEVEL: 'silent', DATA_DIR: dir, SANDBOX_PREFIX: PREFIX, MCP_API_KEY: TEST_API_KEY, SANDBOX_POOL_SIZE: '0' })
  const names: Record<string, string[]> = { 'canary-a.test': ['127.0.0.1'], 'canary-b.test': ['127.0.0.1'], 'private.test': ['10.255.255.1'] }
  const app = await buildApp(config, [
    entry(sandboxDocker, { dockerHost: DOCKER_HOST, dataDir: dir }),
    entry(chatStorage, { dataDir: dir }),
    entry(sandbox, { image: TEST_IMAGE, prefix: PREFIX, dataDir: dir, memLimit: 512 * 1024 * 1024 }),
    entry(egress, {
      allow: `127.0.0.1:${a.port}`,
      lookup: nameLookup(names)
    })
  ], { logger: process.env.TEST_LOG === '1' ? { level: 'debug' } : false })
  t.teardown(async () => {
    const net = app.sandbox.network?.()
    await app.close()
    if (net != null) await removeNetworkFirewall(net.name)
  })
  await app.ready()
  const info = await app.sandbox.ensure(CHAT)
  const sh = async (script: string): Promise<{ out: string, code: number | null }> => {
    const r = await app.sandbox.exec(CHAT, ['bash', '-c', script], { timeoutMs: 60_000 })
    return { out: r.stdout.toString() + r.stderr.toString(), code: r.exitCode }
  }
  const net = app.sandbox.network?.()
  t.ok(net, 'the internal sandbox network is prepared')
  const auth = { authorization: `Bearer ${TEST_API_KEY}` }

  t.test('the allowed canary is reachable with curl (plain and CONNECT), python and git', async t => {
    const env = await sh('echo "$http_proxy|$HTTPS_PROXY|$NO_PROXY"')
    t.equal(env.out.trim(), `http://${net?.gateway}:3128|http://${net?.gateway}:3128|localhost,127.0.0.1,::1`)
    t.match(await sh(`curl -sS -m 20 http://canary-a.test:${a.port}/plain`), { out: 'hello from canary-a\n', code: 0 })
    t.match(await sh(`curl -sS -m 20 -p http://canary-a.test:${a.port}/tunnel`), { out: 'hello from canary-a\n', code: 0 }, 'through a CONNECT tunnel')
    t.match(await sh(`python3 -c "import urllib.request; print(urllib.request.urlopen('http://canary-a.test:${a.port}/python').read().decode(), end='')"`),
      { out: 'hello from canary-a\n', code: 0 }, 'python honours the proxy variables')
    await sh(`git ls-remote http://canary-a.test:${a.port}/repo.git 2>&1; true`)
    t.ok(a.seen.some(s => s.url.startsWith('/repo.git/info/refs') && /^git\//.test(s.ua)), 'git reached the canary through the proxy')
    t.ok(a.seen.some(s => s.url === '/tunnel'))
  })

  t.test('the second canary and a private name are refused with the policy message', async t => {
    const plain = await sh(`curl -sS -m 20 http://canary-b.test:${b.port}/`)
    t.equal(plain.out, 'blocked by the sandbox egress policy: canary-b.test (127.0.0.1) is a loopback address; only an explicit address rule in EGRESS_ALLOW can allow it\n')
    const tunnel = await sh(`python3 -c "
import http.client
c = http.client.HTTPConnection('${net?.gateway}', 3128, timeout=20)
c.set_tunnel('canary-b.test', ${b.port})
try:
    c.request('GET', '/')
except OSError as e:
    print(e)
"`)
    t.match(tunnel.out, /Tunnel connection failed: 403 blocked by the sandbox egress policy: canary-b\.test/)
    t.match((await sh('curl -sS -m 20 http://private.test/')).out, /blocked by the sandbox egress policy: private\.test \(10\.255\.255\.1\) is a private address/)
    t.equal(b.seen.length, 0, 'the refused canary never saw a request')
  })

  t.test('SOCKS5 on the same port: curl --socks5-hostname and ALL_PROXY reach the allowed canary; the other is refused', async t => {
    t.equal((await sh('echo "$ALL_PROXY|$all_proxy"')).out.trim(), `socks5h://${net?.gateway}:3128|socks5h://${net?.gateway}:3128`)
    t.match(await sh(`curl -sS -m 20 --socks5-hostname ${net?.gateway}:3128 http://canary-a.test:${a.port}/socks`), { out: 'hello from canary-a\n', code: 0 })
    t.match(await sh(`env -u http_proxy -u HTTP_PROXY curl -sS -m 20 http://canary-a.test:${a.port}/all-proxy`), { out: 'hello from canary-a\n', code: 0 }, 'ALL_PROXY alone')
    const refused = await sh(`curl -sS -m 20 --socks5-hostname ${net?.gateway}:3128 http://canary-b.test:${b.port}/ 2>&1`)
    t.not(refused.code, 0)
    t.match(refused.out, /not allowed|ruleset|SOCKS5/i)
    t.ok(a.seen.some(s => s.url === '/socks') && a.seen.some(s => s.url === '/all-proxy'))
    t.equal(b.seen.length, 0)
    const log = (await app.inject({ method: 'GET', url: `/api/egress/${CHAT}/log`, headers: auth })).json() as { connections: Array<{ method: string, host: string, decision: string }> }
    t.ok(log.connections.some(c => c.method === 'SOCKS5' && c.host === 'canary-a.test' && c.decision === 'allowed'))
    t.ok(log.connections.some(c => c.method === 'SOCKS5' && c.host === 'canary-b.test' && c.decision === 'denied'))
  })

  t.test('direct connections that bypass the proxy fail', async t => {
    const hostAddr = Object.values(networkInterfaces()).flat().find(i => i?.family === 'IPv4' && !i.internal && i.address !== net?.gateway)?.address
    const targets = [`${net?.gateway ?? ''}:${hostService.port}`, `${net?.gateway ?? ''}:22`, ...(hostAddr === undefined ? [] : [`${hostAddr}:${hostService.port}`])]
    for (const target of targets) {
      const r = await sh(`curl -sS -m 5 --noproxy '*' http://${target}/ 2>&1; echo "exit=$?"`)
      t.notMatch(r.out, /hello from/, `direct ${target} is not reachable`)
      t.match(r.out, /exit=(7|28)\b/, `direct ${target} fails to connect`)
    }
    t.equal(hostService.seen.length, 0)
    t.equal((await sh('cat /proc/sys/net/ipv6/conf/all/disable_ipv6')).out.trim(), '1', 'IPv6 is off inside (no link-local path to the host)')
  })

  t.test('the per-chat log shows both decisions; reading it needs credentials', async t => {
    t.equal((await app.inject({ method: 'GET', url: `/api/egress/${CHAT}/log` })).statusCode, 401)
    const res = await app.inject({ method: 'GET', url: `/api/egress/${CHAT}/log`, headers: auth })
    t.equal(res.statusCode, 200)
    const { connections } = res.json() as { connections: Array<{ host: string, decision: string, bytesDown: number, message?: string }> }
    const allowed = connections.find(c => c.host === 'canary-a.test' && c.decision === 'allowed')
    t.ok(allowed !== undefined && allowed.bytesDown > 0, 'allowed with bytes')
    t.match(connections.find(c => c.host === 'canary-b.test'), { decision: 'denied', message: /loopback address/ })
  })

  t.test('a per-chat override takes effect on the next connection without restarting the sandbox', async t => {
    t.equal((await app.inject({ method: 'PUT', url: `/api/egress/${CHAT}`, payload: { allow: [`127.0.0.1:${b.port}`] } })).statusCode, 401, 'bearer required')
    const bad = await app.inject({ method: 'PUT', url: `/api/egress/${CHAT}`, headers: auth, payload: { allow: ['*bad'] } })
    t.match({ status: bad.statusCode, body: bad.json() }, { status: 400, body: { error: 'bad_rule', detail: /'\*bad'/ } })
    const put = await app.inject({ method: 'PUT', url: `/api/egress/${CHAT}`, headers: auth, payload: { allow: [`127.0.0.1:${b.port}`] } })
    t.equal(put.statusCode, 200)
    t.match(put.json(), { mode: 'open', override: { mode: null, allow: [`127.0.0.1:${b.port}`] } })
    t.match(await sh(`curl -sS -m 20 http://canary-b.test:${b.port}/now`), { out: 'hello from canary-b\n', code: 0 })
    await app.inject({ method: 'PUT', url: `/api/egress/${CHAT}`, headers: auth, payload: { mode: 'off' } })
    t.match((await sh(`curl -sS -m 20 http://canary-a.test:${a.port}/`)).out, /egress is switched off/)
    const cleared = await app.inject({ method: 'DELETE', url: `/api/egress/${CHAT}`, headers: auth })
    t.match(cleared.json(), { mode: 'open', override: null })
    t.match(await sh(`curl -sS -m 20 http://canary-a.test:${a.port}/again`), { out: 'hello from canary-a\n' })
    t.equal((await app.sandbox.status(CHAT)).sandboxId, info.sandboxId, 'same container throughout')
  })
})
