import t from 'tap'
import { lookup as systemLookup } from 'node:dns/promises'
import { stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { checkServers, createResolver, FAMILY_GRACE_MS, parseServers } from '../../../plugins/egress/resolver.js'
import { parseHosts } from '../../../plugins/egress/hosts-file.js'
import { dnsServer } from './dns-server.js'
import { tempDir } from '../../fixtures/temp-dir.js'

// The proxy's resolver: c-ares against a DNS server this test runs on loopback; nothing leaves the machine.

const ANSWERS = {
  'ok.test': { a: ['127.0.0.1'] },
  'dual.test': { a: ['192.0.2.7'], aaaa: ['2001:db8::7'] },
  'v6only.test': { aaaa: ['2001:db8::6'] },
  'noaaaa.test': { a: ['192.0.2.8'], dropAaaa: true }
}

const elapsed = (from: number): number => Date.now() - from

t.test('resolves A and AAAA from the configured server, IPv4 first; unknown names are ENOTFOUND', async t => {
  const dns = await dnsServer(t, ANSWERS)
  const lookup = createResolver({ servers: [`127.0.0.1:${dns.port}`], timeoutMs: 3000 })
  t.same(await lookup('dual.test'), ['192.0.2.7', '2001:db8::7'])
  t.same(await lookup('OK.test.'), ['127.0.0.1'], 'case and a trailing dot do not matter')
  t.same(await lookup('v6only.test'), ['2001:db8::6'])
  await t.rejects(lookup('nowhere.test'), { code: 'ENOTFOUND' })
  t.same(dns.queries.filter(q => q.name === 'dual.test').map(q => q.type).sort(), ['A', 'AAAA'], 'both families asked of the test server')
  t.same(await lookup('192.0.2.1'), ['192.0.2.1'], 'an address literal is its own answer, no query')
  t.same(await lookup('[2001:db8::1]'), ['2001:db8::1'])
  t.notOk(dns.queries.some(q => q.name.startsWith('192.') || q.name.includes('2001')))
})

t.test('a server that drops AAAA costs the grace period, not the deadline', async t => {
  const dns = await dnsServer(t, ANSWERS)
  const lookup = createResolver({ servers: [`127.0.0.1:${dns.port}`], timeoutMs: 4000 })
  const from = Date.now()
  t.same(await lookup('noaaaa.test'), ['192.0.2.8'])
  t.ok(elapsed(from) < FAMILY_GRACE_MS + 1750, `answered in ${elapsed(from)} ms, the deadline is 4000`)
})

t.test('a name whose DNS never answers fails at the deadline, and an aborted lookup ends at once', async t => {
  const dns = await dnsServer(t, ANSWERS)
  const lookup = createResolver({ servers: [`127.0.0.1:${dns.port}`], timeoutMs: 800 })
  let from = Date.now()
  await t.rejects(lookup('a.hang.test'), { code: 'ETIMEOUT' })
  t.ok(elapsed(from) >= 790 && elapsed(from) < 3000, `timed out after ${elapsed(from)} ms`)
  const abort = new AbortController()
  from = Date.now()
  const pending = createResolver({ servers: [`127.0.0.1:${dns.port}`], timeoutMs: 10_000 })('b.hang.test', abort.signal)
  setTimeout(() => { abort.abort() }, 100)
  await t.rejects(pending, { code: 'ECANCELLED' })
  t.ok(elapsed(from) < 2000, `cancelled after ${elapsed(from)} ms (deadline 10 s)`)
  t.ok(dns.swallowed().has('b.hang.test'), 'the query did reach the test server')
})

t.test('60 lookups that never answer leave the file system and the system resolver free (no libuv pool thread held)', async t => {
  const dns = await dnsServer(t, ANSWERS)
  const lookup = createResolver({ servers: [`127.0.0.1:${dns.port}`], timeoutMs: 4000 })
  const abort = new AbortController()
  const flood = Array.from({ length: 60 }, (_, i) => lookup(`n${i}.hang.test`, abort.signal).catch((err: NodeJS.ErrnoException) => err.code))
  for (let waited = 0; dns.swallowed().size < 60 && waited < 5000; waited += 20) await new Promise(resolve => setTimeout(resolve, 20))
  t.equal(dns.swallowed().size, 60, 'every name was asked and is pending')
  const dir = await tempDir(t, 'egress-resolver')
  await writeFile(join(dir, 'f'), 'x')
  let from = Date.now()
  await Promise.all(Array.from({ length: 40 }, async () => await stat(join(dir, 'f'))))
  t.ok(elapsed(from) < 2000, `40 fs.stat calls in ${elapsed(from)} ms`)
  from = Date.now()
  // getaddrinfo of localhost answers from /etc/hosts on the thread pool: no query leaves the machine.
  await Promise.all(Array.from({ length: 8 }, async () => await systemLookup('localhost')))
  t.ok(elapsed(from) < 2000, `8 getaddrinfo calls in ${elapsed(from)} ms`)
  t.same(await lookup('ok.test'), ['127.0.0.1'], 'another lookup still answers at once')
  abort.abort()
  t.same(new Set(await Promise.all(flood)), new Set(['ECANCELLED']))
})

t.test('hosts-file names answer without DNS; localhost is loopback even without a file', async t => {
  const dns = await dnsServer(t, ANSWERS)
  const table = parseHosts('# comment\n10.9.8.7  Mirror.Test  mirror  # pinned\n2001:db8::9 mirror.test\nbad line\n300.1.1.1 broken.test\n')
  const lookup = createResolver({ servers: [`127.0.0.1:${dns.port}`], timeoutMs: 2000, hosts: () => table })
  t.same(await lookup('mirror.test'), ['10.9.8.7', '2001:db8::9'])
  t.same(await lookup('localhost'), ['127.0.0.1', '::1'])
  t.equal(table.has('broken.test'), false, 'an invalid address is skipped')
  t.equal(dns.queries.length, 0, 'no DNS query for pinned names')
  const own = parseHosts('127.0.1.1 localhost\n')
  t.same(own.get('localhost'), ['127.0.1.1'], "the file's localhost wins over the built-in")
})

t.test('EGRESS_DNS_SERVERS: separators and a clear refusal of a bad entry', async t => {
  t.same(parseServers(' 192.0.2.53, [2001:db8::53]:5353  192.0.2.54:53 '), ['192.0.2.53', '[2001:db8::53]:5353', '192.0.2.54:53'])
  t.doesNotThrow(() => { checkServers(parseServers('192.0.2.53,[2001:db8::53]:5353')) })
  t.throws(() => { checkServers(['dns.example.com']) })
})
