/*
 * Egress over the agent socket on a real engine (docs/network.md#egress-over-the-agent-socket): sandboxes
 * have no network interface but loopback; their agent relays 127.0.0.1:3128 to the server's policy proxy
 * through egress.sock in their run directory, and the chat is the one whose socket the connection came
 * through. Traffic goes only to servers this test starts on this machine.
 */
import t from 'tap'
import type { Test } from 'tap'
import http from 'node:http'
import { mkdtemp, readdir, stat } from 'node:fs/promises'
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
import { cleanupPrefix, DOCKER_HOST, dockerOrSkip, TEST_IMAGE } from './docker.js'
import { nameLookup } from '../fixtures/name-lookup.js'

const PREFIX = 'tegsock'
const A = 'egress-sock-a'
const B = 'egress-sock-b'
const BIG = 50 * 1024 * 1024
const { skip } = await dockerOrSkip()

async function canary (t: Test, name: string, host = '127.0.0.1'): Promise<{ port: number, urls: string[] }> {
  const urls: string[] = []
  const big = Buffer.alloc(1024 * 1024, 'x')
  const server = http.createServer((req, res) => {
    urls.push(req.url ?? '')
    if (req.url === '/big') {
      res.setHeader('content-length', String(BIG))
      let n = 0
      const more = (): void => { while (n < BIG) { n += big.length; if (!res.write(big)) { res.once('drain', more); return } } res.end() }
      more()
      return
    }
    res.end(`hello from ${name}\n`)
  })
  await new Promise<void>(resolve => server.listen(0, host, resolve))
  t.teardown(() => { server.closeAllConnections(); server.close() })
  return { port: (server.address() as AddressInfo).port, urls }
}

t.test('sandbox egress over the agent socket (real Docker)', { skip }, async t => {
  await cleanupPrefix(t, PREFIX)
  const a = await canary(t, 'canary-a')
  const hostService = await canary(t, 'host-service', '0.0.0.0')
  const dir = await mkdtemp(join(tmpdir(), `${PREFIX}-data-`))
  const config = loadConfig({ DOCKER_IMAGE: TEST_IMAGE, LOG_LEVEL: 'silent', DATA_DIR: dir, SANDBOX_PREFIX: PREFIX, MCP_API_KEY: TEST_API_KEY, SANDBOX_POOL_SIZE: '0' })
  const names: Record<string, string[]> = { 'canary-a.test': ['127.0.0.1'] }
  const app = await buildApp(config, [
    entry(sandboxDocker, { dockerHost: DOCKER_HOST, dataDir: dir, agentRunDir: join(dir, 'run'), egressSocket: true }),
    entry(chatStorage, { dataDir: dir }),
    entry(sandbox, { image: TEST_IMAGE, prefix: PREFIX, dataDir: dir, memLimit: 512 * 1024 * 1024 }),
    entry(egress, {
      allow: `127.0.0.1:${a.port}`,
      lookup: nameLookup(names)
    })
  ], { logger: process.env.TEST_LOG === '1' ? { level: 'debug' } : false })
  t.teardown(async () => { await app.close() })
  await app.ready()
  await app.sandbox.ensure(A)
  const sh = async (chat: string, script: string): Promise<{ out: string, code: number | null }> => {
    const r = await app.sandbox.exec(chat, ['bash', '-c', script], { timeoutMs: 60_000 })
    return { out: r.stdout.toString() + r.stderr.toString(), code: r.exitCode }
  }
  const auth = { authorization: `Bearer ${TEST_API_KEY}` }

  t.test('no network interface but loopback; no sandbox network, no proxy listener on a gateway', async t => {
    t.equal((await sh(A, 'ls /sys/class/net')).out.trim(), 'lo', 'only lo')
    t.equal(app.sandbox.network?.() ?? null, null, 'the core prepared no sandbox network')
    const nets = (await app.sandboxEngine.listNetworks([`cu.prefix=${PREFIX}`])).filter(n => n.name === `${PREFIX}-sandboxes`)
    t.equal(nets.length, 0, 'Docker has no network of this prefix')
    t.equal((await sh(A, 'echo "$http_proxy|$HTTPS_PROXY|$ALL_PROXY|$NO_PROXY"')).out.trim(), 'http://127.0.0.1:3128|http://127.0.0.1:3128|socks5h://127.0.0.1:3128|localhost,127.0.0.1,::1')
    t.equal(await app.sandbox.appAddress?.(A) ?? null, null, 'no address for the direct route to apps: they take the relay')
  })

  t.test('curl (plain, CONNECT, SOCKS5) and python reach the allowed canary through the relay', async t => {
    t.match(await sh(A, `curl -sS -m 20 http://canary-a.test:${a.port}/plain`), { out: 'hello from canary-a\n', code: 0 })
    t.match(await sh(A, `curl -sS -m 20 -p http://canary-a.test:${a.port}/tunnel`), { out: 'hello from canary-a\n', code: 0 }, 'through a CONNECT tunnel')
    t.match(await sh(A, `curl -sS -m 20 --socks5-hostname 127.0.0.1:3128 http://canary-a.test:${a.port}/socks`), { out: 'hello from canary-a\n', code: 0 }, 'SOCKS5')
    t.match(await sh(A, `python3 -c "import urllib.request; print(urllib.request.urlopen('http://canary-a.test:${a.port}/python').read().decode(), end='')"`),
      { out: 'hello from canary-a\n', code: 0 }, 'python honours the proxy variables')
    t.ok(['/plain', '/tunnel', '/socks', '/python'].every(u => a.urls.includes(u)), 'the canary saw each')
    const log = (await app.inject({ method: 'GET', url: `/api/egress/${A}/log`, headers: auth })).json() as { connections: Array<{ method: string, host: string, decision: string }> }
    t.ok(['HTTP', 'CONNECT', 'SOCKS5'].every(m => log.connections.some(c => c.method === m && c.host === 'canary-a.test' && c.decision === 'allowed')), 'the chat\'s log has each method')
  })

  t.test('the chat is the socket\'s: another chat\'s override applies to its own sandbox only', async t => {
    await app.sandbox.ensure(B)
    const set = await app.inject({ method: 'PUT', url: `/api/egress/${B}`, headers: auth, payload: { mode: 'off' } })
    t.equal(set.statusCode, 200, 'chat B: egress off')
    const refused = await sh(B, `curl -sS -m 20 http://canary-a.test:${a.port}/from-b`)
    t.match(refused.out, /blocked by the sandbox egress policy/, 'chat B is refused')
    t.match(await sh(A, `curl -sS -m 20 http://canary-a.test:${a.port}/from-a`), { out: 'hello from canary-a\n', code: 0 }, 'chat A is not')
    t.notOk(a.urls.includes('/from-b'))
    const logB = (await app.inject({ method: 'GET', url: `/api/egress/${B}/log`, headers: auth })).json() as { connections: Array<{ decision: string }> }
    t.ok(logB.connections.some(c => c.decision === 'denied'), 'B\'s log has the refusal')
    const logA = (await app.inject({ method: 'GET', url: `/api/egress/${A}/log`, headers: auth })).json() as { connections: Array<{ decision: string }> }
    t.notOk(logA.connections.some(c => c.decision === 'denied'), 'A\'s has none')
  })

  t.test('no route to the host\'s services, whatever the host firewall', async t => {
    const hostAddr = Object.values(networkInterfaces()).flat().find(i => i?.family === 'IPv4' && !i.internal)?.address
    const targets = ['172.17.0.1', ...(hostAddr === undefined ? [] : [hostAddr])]
    for (const ip of targets) {
      const r = await sh(A, `python3 -c "
import socket
s = socket.socket()
s.settimeout(5)
try:
    s.connect(('${ip}', ${hostService.port}))
    print('connected')
except OSError as e:
    print(type(e).__name__, e.errno)
"`)
      t.match(r.out, /OSError 101|Network is unreachable|errno 101/i, `${ip}: network unreachable (${r.out.trim()})`)
    }
    t.equal(hostService.urls.length, 0, 'the host service saw nothing')
  })

  t.test('the agent started again over exec (the entrypoint\'s killed) takes the relay up', async t => {
    await sh(A, 'nohup sh -c "sleep 0.3; pkill -f cubicle-agent.py" >/dev/null 2>&1 &')
    await new Promise(resolve => setTimeout(resolve, 1500))
    let out = ''
    for (let i = 0; i < 5 && out !== 'hello from canary-a\n'; i++) {
      out = await sh(A, `curl -sS -m 20 http://canary-a.test:${a.port}/after-kill`).then(r => r.out, (err: Error) => err.message)
    }
    t.equal(out, 'hello from canary-a\n', 'out again')
    t.match((await sh(A, 'pgrep -fc "[c]ubicle-agent.py"')).out.trim(), /^[1-9]/, 'an agent runs')
    t.equal((await sh(A, 'pgrep -f "[c]ubicle-agent.py --connect" || echo none')).out.trim(), 'none', 'the one the server started over exec')
  })

  t.test('a chat\'s sandbox removed (by its name, as the core does): its egress socket and run directory go with it', async t => {
    const run = join(dir, 'run')
    const labelOf = async (chat: string): Promise<string> => {
      const id = (await app.sandbox.status(chat)).sandboxId ?? ''
      return (await app.sandboxEngine.inspect(id))?.labels['cubicle.agent-run'] ?? ''
    }
    const token = await labelOf(B)
    t.ok((await readdir(run)).includes(token), 'B has its run directory')
    const sock = join(run, token, 's', 'egress.sock')
    await app.sandbox.remove(B)
    t.notOk((await readdir(run)).includes(token), 'gone with the sandbox')
    await t.rejects(stat(sock), 'its egress socket too')
    t.ok((await readdir(run)).includes(await labelOf(A)), 'A\'s stays')
  })

  t.test('a 50 MB download through the relay arrives whole', async t => {
    const r = await sh(A, `curl -sS -m 120 -o /dev/null -w '%{size_download} %{speed_download}' http://canary-a.test:${a.port}/big`)
    const [size, speed] = r.out.trim().split(' ').map(Number)
    t.equal(size, BIG, 'every byte')
    t.comment(`relay throughput: ${((speed ?? 0) / 1024 / 1024).toFixed(0)} MB/s (the proxy throttles each chat at EGRESS_MAX_BYTES_PER_SECOND)`)
  })
})

t.test('an upgrade: a sandbox on the network from before keeps its way out; stopped, it is recreated without a network', { skip }, async t => {
  const prefix = `${PREFIX}u`
  await cleanupPrefix(t, prefix)
  const a = await canary(t, 'canary-a')
  const dir = await mkdtemp(join(tmpdir(), `${prefix}-data-`))
  const config = loadConfig({ DOCKER_IMAGE: TEST_IMAGE, LOG_LEVEL: 'silent', DATA_DIR: dir, SANDBOX_PREFIX: prefix, MCP_API_KEY: TEST_API_KEY, SANDBOX_POOL_SIZE: '0' })
  const build = async (egressSocket: boolean): Promise<Awaited<ReturnType<typeof buildApp>>> => {
    const app = await buildApp(config, [
      entry(sandboxDocker, { dockerHost: DOCKER_HOST, dataDir: dir, agentRunDir: join(dir, 'run'), egressSocket }),
      entry(chatStorage, { dataDir: dir }),
      entry(sandbox, { image: TEST_IMAGE, prefix, dataDir: dir, memLimit: 512 * 1024 * 1024 }),
      entry(egress, { allow: `127.0.0.1:${a.port}`, firewall: false, lookup: async () => ['127.0.0.1'] })
    ], { logger: process.env.TEST_LOG === '1' ? { level: 'debug' } : false })
    await app.ready()
    return app
  }
  const curl = async (app: Awaited<ReturnType<typeof buildApp>>, path: string): Promise<string> => {
    const r = await app.sandbox.exec(A, ['bash', '-c', `ls /sys/class/net | tr '\\n' ' '; curl -sS -m 20 http://canary-a.test:${a.port}${path}`], { timeoutMs: 60_000 })
    return r.stdout.toString() + r.stderr.toString()
  }
  const before = await build(false)
  await before.sandbox.ensure(A)
  t.match(await curl(before, '/before'), /^eth0 lo hello from canary-a\n$/, 'SANDBOX_EGRESS_SOCKET=false: on the network')
  await before.close()

  const after = await build(true)
  t.teardown(async () => { await after.close() })
  await after.sandbox.ensure(A)
  t.ok(after.sandbox.network?.(), 'the network is prepared for the sandbox found on it')
  t.match(await curl(after, '/running'), /^eth0 lo hello from canary-a\n$/, 'the running sandbox keeps its network and its way out')
  await after.sandbox.stop(A)
  await after.sandbox.ensure(A)
  t.match(await curl(after, '/recreated'), /^lo hello from canary-a\n$/, 'stopped and started again: recreated without a network, out over the agent socket')
  t.same(a.urls, ['/before', '/running', '/recreated'])
})

t.test('a sandbox claimed from the warm pool goes out over its socket from its first command', { skip }, async t => {
  const prefix = `${PREFIX}p`
  await cleanupPrefix(t, prefix)
  const a = await canary(t, 'canary-a')
  const dir = await mkdtemp(join(tmpdir(), `${prefix}-data-`))
  const config = loadConfig({ DOCKER_IMAGE: TEST_IMAGE, LOG_LEVEL: 'silent', DATA_DIR: dir, SANDBOX_PREFIX: prefix, MCP_API_KEY: TEST_API_KEY, SANDBOX_POOL_SIZE: '1' })
  const app = await buildApp(config, [
    entry(sandboxDocker, { dockerHost: DOCKER_HOST, dataDir: dir, agentRunDir: join(dir, 'run') }),
    entry(chatStorage, { dataDir: dir }),
    entry(sandbox, { image: TEST_IMAGE, prefix, dataDir: dir, memLimit: 512 * 1024 * 1024, poolSize: 1 }),
    entry(egress, { allow: `127.0.0.1:${a.port}`, firewall: false, lookup: async () => ['127.0.0.1'] })
  ], { logger: process.env.TEST_LOG === '1' ? { level: 'debug' } : false })
  t.teardown(async () => { await app.close() })
  await app.ready()
  for (let i = 0; i < 300 && (app.sandbox.pooled?.() ?? 0) < 1; i++) await new Promise(resolve => setTimeout(resolve, 100))
  t.equal(app.sandbox.pooled?.(), 1, 'a pool sandbox is ready')
  await app.sandbox.ensure(A)
  const r = await app.sandbox.exec(A, ['bash', '-c', `curl -sS -m 20 http://canary-a.test:${a.port}/claimed`], { timeoutMs: 60_000 })
  t.equal(r.stdout.toString() + r.stderr.toString(), 'hello from canary-a\n', 'the plugin option\'s default: egress over the socket')
})
