import t from 'tap'
import { lookup as systemLookup } from 'node:dns/promises'
import { stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import Fastify from 'fastify'
import { addressSet } from '../../../plugins/egress/addresses.js'
import { createEgressProxy } from '../../../plugins/egress/proxy.js'
import { createResolver } from '../../../plugins/egress/resolver.js'
import { parseRules } from '../../../plugins/egress/rules.js'
import { dnsServer } from './dns-server.js'
import { egressService, send, tunnel, upstream, type Answer } from './harness.js'
import { tempDir } from '../../fixtures/temp-dir.js'

// One sandbox flooding the proxy with names whose DNS never answers: the other chats' lookups, the
// file system and the server's own resolver stay free; the flood is capped and told why. The DNS
// server and the upstream are this test's own, on loopback.

const elapsed = (from: number): number => Date.now() - from
const settle = async (ms: number): Promise<void> => { await new Promise(resolve => setTimeout(resolve, ms)) }
/** waits (at most 5 s, the machine may be busy) until check() holds */
const until = async (check: () => boolean): Promise<void> => { for (const from = Date.now(); !check() && elapsed(from) < 5000;) await settle(20) }

t.test('40 CONNECTs to never-answered names: 8 wait, 32 get 503 at once and are logged; another chat connects, fs and getaddrinfo stay fast', async t => {
  const canary = await upstream(t, 'canary')
  const dns = await dnsServer(t, { 'ok.test': { a: ['127.0.0.1'] } })
  const { port, built, source } = await egressService(t, ['flood', 'quiet'], {
    allow: `127.0.0.1:${canary}`, dnsServers: `127.0.0.1:${dns.port}`, dnsTimeoutMs: 15_000, hostsFile: ''
  })
  const answers: Answer[] = []
  const flood = Array.from({ length: 40 }, async (_, i) => {
    const a = await tunnel(port, source('flood'), `n${i}.hang.test:443`)
    answers.push(a)
    return a
  })
  const from0 = Date.now()
  while (answers.length < 32 && elapsed(from0) < 5000) await settle(20)
  t.equal(answers.length, 32, `32 answered at once (${elapsed(from0)} ms on this machine, no DNS answer involved)`)
  await settle(300)
  t.equal(answers.length, 32, 'the other 8 are still waiting for DNS')
  t.ok(answers.every(a => a.status === 503 && /^cannot resolve n\d+\.hang\.test: egress proxy busy: 8 name lookups of this sandbox are already in flight$/.test(a.message)), answers[0]?.message ?? 'no answer')
  t.equal(built.proxy.lookups('flood'), 8, '8 lookups in flight for the flooding chat')
  t.equal(dns.swallowed().size, 8, 'only 8 names reached the DNS server')
  const logged = built.service.connections('flood')
  t.equal(logged.filter(r => r.reason === 'dns-limit' && r.decision === 'failed').length, 32, "every refusal is in the chat's egress log")

  let from = Date.now()
  const quiet = await tunnel(port, source('quiet'), `ok.test:${canary}`)
  t.equal(quiet.status, 200, `another chat's lookup and connection succeed (${elapsed(from)} ms)`)
  t.ok(elapsed(from) < 2000)
  quiet.socket.write('GET /through HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
  let body = ''
  for await (const c of quiet.socket) body += (c as Buffer).toString()
  t.match(body, /canary \/through/)

  const dir = await tempDir(t, 'egress-dns')
  await writeFile(join(dir, 'f'), 'x')
  from = Date.now()
  await Promise.all(Array.from({ length: 40 }, async () => await stat(join(dir, 'f'))))
  t.ok(elapsed(from) < 2000, `fs is not blocked: 40 stat calls in ${elapsed(from)} ms`)
  from = Date.now()
  await Promise.all(Array.from({ length: 8 }, async () => await systemLookup('localhost')))
  t.ok(elapsed(from) < 2000, `the server's own getaddrinfo is not blocked: 8 calls in ${elapsed(from)} ms`)

  // The flooding sandbox gives up: its lookups are cancelled, the slots come back at once.
  for (const a of answers) a.socket.destroy()
  const pending = (await Promise.race([Promise.all(flood).then(() => 'all'), settle(50).then(() => 'pending')]))
  t.equal(pending, 'pending', 'the 8 waiting CONNECTs are still unanswered')
  void Promise.all(flood).then(list => { for (const a of list) a.socket.destroy() })
  t.end()
})

t.test('a client that goes away cancels its lookup: the slot is free at once, not at the deadline', async t => {
  const dns = await dnsServer(t, {})
  const { port, built, source } = await egressService(t, ['chat'], { dnsServers: `127.0.0.1:${dns.port}`, dnsTimeoutMs: 10_000, hostsFile: '' })
  const waiting = Array.from({ length: 8 }, (_, i) => send(port, source('chat'), `CONNECT w${i}.hang.test:443 HTTP/1.1\r\nHost: w${i}.hang.test:443`))
  await until(() => built.proxy.lookups('chat') === 8)
  t.equal(built.proxy.lookups('chat'), 8)
  t.equal((await tunnel(port, source('chat'), 'x.hang.test:443')).status, 503, 'the ninth is refused')
  for (const w of waiting) w.socket.destroy()
  const from = Date.now()
  while (built.proxy.lookups('chat') > 0 && elapsed(from) < 3000) await settle(20)
  t.equal(built.proxy.lookups('chat'), 0, `all 8 lookups ended ${elapsed(from)} ms after their clients left`)
  t.ok(elapsed(from) < 2000, 'well before the 10 s deadline')
  const again = send(port, source('chat'), 'CONNECT y.hang.test:443 HTTP/1.1\r\nHost: y.hang.test:443')
  await until(() => built.proxy.lookups('chat') === 1)
  t.equal(built.proxy.lookups('chat'), 1, 'a new lookup gets a slot again')
  again.socket.destroy()
  await Promise.allSettled(waiting.map(w => w.answer))
})

t.test('a lookup past its deadline is answered 502 ETIMEOUT and logged', async t => {
  const dns = await dnsServer(t, {})
  const { port, built, source } = await egressService(t, ['chat'], { dnsServers: `127.0.0.1:${dns.port}`, dnsTimeoutMs: 600, hostsFile: '' })
  const from = Date.now()
  const a = await tunnel(port, source('chat'), 'slow.hang.test:443')
  t.equal(a.status, 502)
  t.equal(a.message, 'cannot resolve slow.hang.test: ETIMEOUT')
  t.ok(elapsed(from) >= 590 && elapsed(from) < 3000, `after ${elapsed(from)} ms`)
  t.match(built.service.connections('chat'), [{ host: 'slow.hang.test', decision: 'failed', reason: 'dns' }])
  a.socket.destroy()
})

t.test('the total cap: past it every chat gets 503 at once; the reserve lets a chat with at most one lookup in', async t => {
  const dns = await dnsServer(t, {})
  const lookup = createResolver({ servers: [`127.0.0.1:${dns.port}`], timeoutMs: 3000 })
  const p = createEgressProxy({
    log: Fastify({ logger: false }).log,
    identify: a => ({ '127.0.0.2': 'a', '127.0.0.3': 'b', '127.0.0.4': 'c' } as Record<string, string>)[a] ?? null,
    policyFor: () => ({ mode: 'open', rules: parseRules(''), hostAddresses: addressSet([]) }),
    lookup,
    record: () => {}
  }, { maxConnectionsPerChat: 64, maxConnections: 100, maxLookupsPerChat: 8, maxLookups: 10, reservedLookups: 2, idleTimeoutMs: 2000, connectTimeoutMs: 2000, headTimeoutMs: 2000, bytesPerSecond: 0 })
  const port = await p.listen('127.0.0.1', 0)
  t.teardown(async () => { await p.close() })
  const held: Array<Promise<Answer>> = []
  for (let i = 0; i < 8; i++) held.push(tunnel(port, '127.0.0.2', `a${i}.hang.test:443`))
  await until(() => p.lookups('a') === 8)
  for (let i = 0; i < 2; i++) held.push(tunnel(port, '127.0.0.3', `b${i}.hang.test:443`))
  await until(() => p.lookups('b') === 2)
  t.same([p.lookups('a'), p.lookups('b')], [8, 2], 'chat a took the shared 8, chat b the reserved 2')
  const refused = await tunnel(port, '127.0.0.4', 'c.hang.test:443')
  t.equal(refused.status, 503)
  t.equal(refused.message, 'cannot resolve c.hang.test: egress proxy busy: 10 name lookups in flight over all sandboxes')
  await p.close()
  await Promise.allSettled(held)
})

t.test('names pinned in the hosts file (and localhost) connect without a DNS query', async t => {
  const canary = await upstream(t, 'canary')
  const dns = await dnsServer(t, {})
  const dir = await tempDir(t, 'egress-hosts')
  await writeFile(join(dir, 'hosts'), '127.0.0.1 mirror.test\n')
  const { port, source } = await egressService(t, ['chat'], { allow: `127.0.0.1:${canary}`, dnsServers: `127.0.0.1:${dns.port}`, hostsFile: join(dir, 'hosts') })
  for (const name of ['mirror.test', 'MIRROR.test.', 'localhost']) {
    const a = await tunnel(port, source('chat'), `${name}:${canary}`)
    t.equal(a.status, 200, `${name} → 127.0.0.1, allowed by the address rule`)
    a.socket.destroy()
  }
  const other = await tunnel(port, source('chat'), `localhost:${canary + 1 > 65535 ? 1 : canary + 1}`)
  t.equal(other.status, 403, 'localhost on another port is loopback, refused')
  other.socket.destroy()
  t.equal(dns.queries.length, 0, 'no DNS query was made')
})
