import t from 'tap'
import { cp, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import Fastify from 'fastify'
import { classify } from '../../../plugins/egress/addresses.js'
import { createHostAddresses, MAX_PROC_FILE, parseFibTrie, parseIfInet6, readUpTo } from '../../../plugins/egress/host-addresses.js'
import { egressService, tunnel } from './harness.js'
import { tempDir } from '../../fixtures/temp-dir.js'

// The `host` address class from the routing table: fixtures of /proc/net/fib_trie and /proc/net/if_inet6
// describe a host whose interface br-down (10.213.7.1/24, fd12:3456:789a::1/64) is down, so Node's
// interface list leaves it out while the kernel still accepts connections to it. No traffic leaves.

const PROC = fileURLToPath(new URL('./fixtures/proc', import.meta.url))
const log = Fastify({ logger: false }).log

t.test('fib_trie: every LOCAL route, single addresses and ranges, of every interface', async t => {
  const text = (await readUpTo(join(PROC, 'net', 'fib_trie'), MAX_PROC_FILE))?.text ?? ''
  t.same(parseFibTrie(text).sort(), ['10.213.7.1/32', '127.0.0.0/8', '127.0.0.1/32', '192.0.2.2/32', '198.51.100.0/24'])
  t.same(parseFibTrie(text, 2).length, 2, 'entries are bounded')
  t.same(parseFibTrie('|-- 10.0.0.1\n   /32 link BROADCAST\n|-- garbage\n/32 host LOCAL\n'), ['garbage/32'], 'unparsable leaves are dropped later by addressSet')
})

t.test('if_inet6: every configured address, up or down', async t => {
  const text = (await readUpTo(join(PROC, 'net', 'if_inet6'), MAX_PROC_FILE))?.text ?? ''
  t.same(parseIfInet6(text), ['::1', 'fd12:3456:789a::1', 'fe80::7', '2001:db8::10'])
  t.same(parseIfInet6('zz 01 80\n0123\n'), [])
})

t.test('a down interface\'s addresses and a local range are "host", not "private"', async t => {
  const host = createHostAddresses({ procDir: PROC, log })
  t.teardown(host.close)
  await host.start()
  const set = host.current()
  t.equal(classify('10.213.7.1', set), 'host')
  t.equal(classify('fd12:3456:789a::1', set), 'host')
  t.equal(classify('2001:db8::10', set), 'host')
  t.equal(classify('198.51.100.77', set), 'host', 'inside a local (AnyIP) range')
  t.equal(classify('::ffff:10.213.7.1', set), 'host', 'mapped form too')
  t.equal(classify('10.213.7.2', set), 'private', 'a neighbour on the same subnet is not the host')
  t.equal(classify('127.0.0.5', set), 'loopback', 'a more specific sensitive class stays')
})

t.test('refreshed: a new local address counts after the next read; an unreadable /proc keeps Node\'s list', async t => {
  const dir = await tempDir(t, 'egress-proc')
  await cp(PROC, dir, { recursive: true })
  const host = createHostAddresses({ procDir: dir, log, refreshMs: 60_000 })
  t.teardown(host.close)
  await host.start()
  t.equal(classify('10.99.0.1', host.current()), 'private')
  await writeFile(join(dir, 'net', 'fib_trie'), 'Local:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 10.99.0.1\n        /32 host LOCAL\n')
  await host.refresh()
  t.equal(classify('10.99.0.1', host.current()), 'host')
  t.equal(classify('10.213.7.1', host.current()), 'private', 'a removed address is no longer the host')
  const none = createHostAddresses({ procDir: join(dir, 'absent'), log })
  await none.start()
  none.close()
  t.equal(classify('127.0.0.1', none.current()), 'loopback')
})

t.test('a big routing file is read only up to the bound', async t => {
  const dir = await tempDir(t, 'egress-proc')
  await writeFile(join(dir, 'big'), Buffer.alloc(300 * 1024, 0x20))
  const read = await readUpTo(join(dir, 'big'), 100 * 1024)
  t.equal(read?.text.length, 100 * 1024)
  t.equal(read?.truncated, true)
  t.equal(await readUpTo(join(dir, 'none'), 10), null)
})

t.test('through the proxy: a CONNECT to a down interface\'s address is refused as the host\'s own', async t => {
  const { port, built, source } = await egressService(t, ['chat'], { procDir: PROC, hostsFile: '' })
  for (const [target, shown] of [['10.213.7.1:8080', '10.213.7.1'], ['[fd12:3456:789a::1]:8080', 'fd12:3456:789a::1']]) {
    const a = await tunnel(port, source('chat'), target ?? '')
    t.equal(a.status, 403)
    t.equal(a.message, `blocked by the sandbox egress policy: ${shown ?? ''} is one of the server host's own addresses; only an explicit address rule in EGRESS_ALLOW can allow it`)
    a.socket.destroy()
  }
  t.match(built.service.connections('chat'), [{ decision: 'denied', reason: 'address-class' }, { decision: 'denied', reason: 'address-class' }])
})
