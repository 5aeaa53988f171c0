/*
 * One real sandbox floods the egress proxy with names whose DNS never answers; another chat's sandbox
 * still resolves and connects at once. The proxy asks a DNS server this test runs on loopback (one that
 * swallows every `*.hang.test` query), so no query leaves the machine; the upstream is this test's too.
 */
import t from 'tap'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { buildApp, entry } from '../../core/app.js'
import { loadConfig } from '../../core/config.js'
import sandboxDocker from '../../plugins/sandbox-docker/index.js'
import sandbox from '../../plugins/sandbox/index.js'
import egress from '../../plugins/egress/index.js'
import chatStorage from '../../plugins/chat-storage/index.js'
import { TEST_API_KEY } from '../helper.js'
import { dnsServer } from '../plugins/egress/dns-server.js'
import { cleanupPrefix, DOCKER_HOST, dockerOrSkip, TEST_IMAGE, removeNetworkFirewall } from '../integration/docker.js'
import { tempDir } from '../fixtures/temp-dir.js'

const PREFIX = 'tegdns'
const { skip } = await dockerOrSkip()

t.test('a sandbox flooding the proxy with never-answered names leaves another chat\'s lookups free (real Docker)', { skip }, async t => {
  await cleanupPrefix(t, PREFIX)
  const server = http.createServer((req, res) => { res.end(`hello ${req.url ?? ''}\n`) })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.closeAllConnections(); server.close() })
  const canary = (server.address() as AddressInfo).port
  const dns = await dnsServer(t, { 'ok.test': { a: ['127.0.0.1'] } })
  const dir = await tempDir(t, `${PREFIX}-data`)
  const config = loadConfig({ DOCKER_IMAGE: TEST_IMAGE, LOG_LEVEL: 'silent', DATA_DIR: dir, SANDBOX_PREFIX: PREFIX, MCP_API_KEY: TEST_API_KEY, SANDBOX_POOL_SIZE: '0' })
  const app = await buildApp(config, [
    entry(sandboxDocker, { dockerHost: DOCKER_HOST, dataDir: dir }),
    entry(chatStorage, { dataDir: dir }),
    entry(sandbox, { image: TEST_IMAGE, prefix: PREFIX, dataDir: dir, memLimit: 512 * 1024 * 1024 }),
    // the real resolver, pointed at the test's DNS server; a long deadline keeps the flood in flight while we look
    entry(egress, { allow: `127.0.0.1:${canary}`, dnsServers: `127.0.0.1:${dns.port}`, dnsTimeoutMs: 30_000, hostsFile: '' })
  ], { logger: false })
  t.teardown(async () => {
    const net = app.sandbox.network?.()
    await app.close()
    if (net != null) await removeNetworkFirewall(net.name)
  })
  await app.ready()
  await Promise.all([app.sandbox.ensure('dns-flood'), app.sandbox.ensure('dns-quiet')])
  const sh = async (chat: string, script: string): Promise<string> => {
    const r = await app.sandbox.exec(chat, ['bash', '-c', script], { timeoutMs: 90_000 })
    return r.stdout.toString() + r.stderr.toString()
  }

  // 40 tunnels to names that never answer, in the background; wait (at most 30 s) until 32 were refused.
  const flood = await sh('dns-flood', `
for i in $(seq 1 40); do (curl -sS -m 60 -p http://n$i.hang.test:80/ > /tmp/dns-$i.out 2>&1 &); done
for s in $(seq 1 300); do
  n=$(grep -l 'response 503' /tmp/dns-*.out 2>/dev/null | wc -l)
  [ "$n" -ge 32 ] && break
  sleep 0.1
done
sleep 1
echo "refused=$(grep -l 'response 503' /tmp/dns-*.out | wc -l) running=$(pgrep -c curl)"`)
  t.match(flood, /refused=32 running=8/, 'the ninth and later lookups of the flooding sandbox are refused at once; 8 wait for DNS')
  t.equal(dns.swallowed().size, 8, 'only 8 names reached the DNS server')

  const from = Date.now()
  const quiet = await sh('dns-quiet', `curl -sS -m 20 http://ok.test:${canary}/quiet; curl -sS -m 20 -p http://ok.test:${canary}/tunnel`)
  t.equal(quiet, 'hello /quiet\nhello /tunnel\n', `the other sandbox resolves and connects during the flood (${Date.now() - from} ms)`)

  const log = app.egress.connections('dns-flood')
  t.equal(log.filter(r => r.reason === 'dns-limit').length, 32, "the refusals are in the flooding chat's log")
  t.match(log.find(r => r.reason === 'dns-limit')?.message, /^cannot resolve n\d+\.hang\.test: egress proxy busy: 8 name lookups of this sandbox are already in flight$/)
  await sh('dns-flood', 'pkill curl; true')
})
