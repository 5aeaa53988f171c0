import t from 'tap'
import { addressSet, classify, formatIp, parseIp } from '../../../plugins/egress/addresses.js'
import { decide, precheck, type Policy } from '../../../plugins/egress/policy.js'
import { parseRules } from '../../../plugins/egress/rules.js'

// the policy engine is a pure function; every address class and rule form, no traffic.

const HOST = addressSet(['192.0.2.2', '172.18.0.1', 'fe80::42:acff:fe12:1', '2a01:4f8::10', '127.0.0.1', '8.8.4.4'])
const policy = (mode: Policy['mode'], allow = ''): Policy => ({ mode, rules: parseRules(allow), hostAddresses: HOST })

t.test('classifies every IPv4 class', async t => {
  const cases: Array<[string, string]> = [
    ['8.8.8.8', 'public'], ['1.1.1.1', 'public'], ['151.101.0.223', 'public'],
    ['127.0.0.1', 'loopback'], ['127.255.255.254', 'loopback'],
    ['10.0.0.1', 'private'], ['172.16.0.1', 'private'], ['172.31.255.255', 'private'], ['192.168.1.1', 'private'],
    ['172.32.0.1', 'public'], ['172.15.255.255', 'public'],
    ['100.64.0.1', 'cgnat'], ['100.127.255.255', 'cgnat'], ['100.128.0.1', 'public'],
    ['169.254.169.254', 'metadata'], ['100.100.100.200', 'metadata'], ['169.254.1.1', 'link-local'],
    ['224.0.0.1', 'multicast'], ['239.255.255.250', 'multicast'],
    ['0.0.0.0', 'unspecified'], ['0.1.2.3', 'unspecified'], ['255.255.255.255', 'broadcast'],
    ['240.0.0.1', 'reserved'], ['198.18.0.1', 'reserved'], ['203.0.113.9', 'reserved'],
    ['192.0.2.2', 'host'], ['172.18.0.1', 'host'], ['8.8.4.4', 'host'], ['127.0.0.1', 'loopback']
  ]
  for (const [address, cls] of cases) t.equal(classify(address, HOST), cls, address)
})

t.test('classifies every IPv6 class, including forms that embed an IPv4 address', async t => {
  const cases: Array<[string, string]> = [
    ['2606:4700::1111', 'public'], ['2a00:1450:4001::200e', 'public'],
    ['::1', 'loopback'], ['::', 'unspecified'], ['[::1]', 'loopback'],
    ['fe80::1', 'link-local'], ['fe80::1%eth0', 'link-local'], ['fd00::5', 'private'], ['fc00::1', 'private'],
    ['fd00:ec2::254', 'metadata'], ['ff02::1', 'multicast'], ['2001:db8::1', 'reserved'],
    ['2001:0:4136:e378::1', 'reserved'], ['3fff::1', 'public'], ['4000::1', 'reserved'],
    ['::ffff:127.0.0.1', 'loopback'], ['::ffff:7f00:1', 'loopback'], ['::ffff:169.254.169.254', 'metadata'],
    ['::ffff:10.1.2.3', 'private'], ['::ffff:8.8.8.8', 'public'], ['::ffff:192.0.2.2', 'host'],
    ['64:ff9b::a9fe:a9fe', 'metadata'], ['64:ff9b::808:808', 'public'], ['2002:7f00:1::1', 'loopback'],
    ['2002:0a00:0001::', 'private'], ['::127.0.0.1', 'reserved'],
    ['fe80::42:acff:fe12:1', 'link-local'], ['2a01:4f8::10', 'host']
  ]
  for (const [address, cls] of cases) t.equal(classify(address, HOST), cls, address)
})

t.test('rejects what is not an address', async t => {
  for (const bad of ['', 'localhost', '1.2.3', '1.2.3.256', '01.2.3.4x', '::g', '1::2::3', '0x7f.1']) {
    t.equal(parseIp(bad), null, bad)
    t.equal(classify(bad), 'invalid', bad)
  }
  t.equal(formatIp(parseIp('2001:db8:0:0:0:0:0:1') ?? { family: 6, value: 0n }), '2001:db8::1')
})

t.test('open mode: public allowed, private and sensitive classes refused with a clear message', async t => {
  const p = policy('open')
  t.match(decide(p, { host: 'example.com', port: 443 }, '93.184.215.14'), { allow: true, reason: 'public' })
  const metadata = decide(p, { host: '169.254.169.254', port: 80 }, '169.254.169.254')
  t.match(metadata, { allow: false, addressClass: 'metadata' })
  t.match(metadata.message, /^blocked by the sandbox egress policy: 169\.254\.169\.254 is a cloud metadata address/)
  const rebind = decide(p, { host: 'rebind.attacker.test', port: 80 }, '10.0.0.7')
  t.equal(rebind.allow, false)
  t.equal(rebind.message, 'blocked by the sandbox egress policy: rebind.attacker.test (10.0.0.7) is a private address')
  t.match(decide(p, { host: 'x.test', port: 80 }, '::ffff:127.0.0.1'), { allow: false, addressClass: 'loopback' })
  t.match(decide(p, { host: 'x.test', port: 8081 }, '192.0.2.2'), { allow: false, addressClass: 'host' })
  t.match(decide(p, { host: 'x.test', port: 80 }, '100.64.3.3'), { allow: false, addressClass: 'cgnat' })
  t.match(decide(p, { host: 'x.test', port: 80 }, 'fd00::1'), { allow: false, addressClass: 'private' })
  t.match(decide(p, { host: 'x.test', port: 80 }, 'not-an-ip'), { allow: false, reason: 'bad-host' })
})

t.test('address rules unlock any class, name rules unlock private but never sensitive classes', async t => {
  const p = policy('open', '10.20.0.0/16:3141, mirror.corp, 127.0.0.1:9000, [fd00::/64]:443')
  t.match(decide(p, { host: '10.20.1.1', port: 3141 }, '10.20.1.1'), { allow: true, reason: 'rule', rule: '10.20.0.0/16:3141' })
  t.match(decide(p, { host: '10.20.1.1', port: 22 }, '10.20.1.1'), { allow: false }, 'port-restricted')
  t.match(decide(p, { host: 'mirror.corp', port: 8080 }, '10.30.0.9'), { allow: true, reason: 'name-rule' })
  t.match(decide(p, { host: 'mirror.corp', port: 8080 }, '127.0.0.1'), { allow: false, addressClass: 'loopback' })
  t.match(decide(p, { host: 'localhost', port: 9000 }, '127.0.0.1'), { allow: true, rule: '127.0.0.1:9000' })
  t.match(decide(p, { host: 'x.test', port: 9000 }, '::ffff:127.0.0.1'), { allow: true }, 'mapped form matches the v4 rule')
  t.match(decide(p, { host: 'x.test', port: 443 }, 'fd00::77'), { allow: true })
  t.match(decide(p, { host: 'x.test', port: 80 }, 'fd00::77'), { allow: false })
})

t.test('allowlist mode: names with wildcards, CIDRs, host:port; everything else refused before DNS', async t => {
  const p = policy('allowlist', '*.pythonhosted.org pypi.org:443 .npmjs.org 203.0.113.0/24')
  t.match(decide(p, { host: 'pypi.org', port: 443 }, '151.101.0.223'), { allow: true, rule: 'pypi.org:443' })
  t.match(decide(p, { host: 'PyPI.org.', port: 443 }, '151.101.0.223'), { allow: true }, 'case and trailing dot')
  t.match(decide(p, { host: 'pypi.org', port: 80 }, '151.101.0.223'), { allow: false, reason: 'not-allowlisted' })
  t.match(decide(p, { host: 'files.pythonhosted.org', port: 443 }, '151.101.1.1'), { allow: true })
  t.match(decide(p, { host: 'pythonhosted.org', port: 443 }, '151.101.1.1'), { allow: false }, '*. excludes the apex')
  t.match(decide(p, { host: 'evilpythonhosted.org', port: 443 }, '151.101.1.1'), { allow: false })
  t.match(decide(p, { host: 'npmjs.org', port: 443 }, '104.16.1.1'), { allow: true }, '. includes the apex')
  t.match(decide(p, { host: 'registry.npmjs.org', port: 443 }, '104.16.1.1'), { allow: true })
  t.match(decide(p, { host: 'example.com', port: 443 }, '93.184.215.14'), { allow: false, reason: 'not-allowlisted' })
  t.match(decide(p, { host: 'anything.test', port: 80 }, '203.0.113.5'), { allow: true }, 'a name resolving into an allowed block')
  t.match(decide(p, { host: 'registry.npmjs.org', port: 443 }, '169.254.169.254'), { allow: false, addressClass: 'metadata' })
  const strict = policy('allowlist', 'pypi.org')
  t.match(precheck(strict, { host: 'example.com', port: 443 }), { allow: false, reason: 'not-allowlisted' })
  t.equal(precheck(strict, { host: 'pypi.org', port: 443 }), null)
  t.equal(precheck(p, { host: 'example.com', port: 443 }), null, 'with an address rule the name must be resolved first')
})

t.test('off mode refuses everything, even allowed names', async t => {
  const p = policy('off', 'pypi.org')
  t.match(decide(p, { host: 'pypi.org', port: 443 }, '151.101.0.223'), { allow: false, reason: 'off' })
  t.match(precheck(p, { host: 'pypi.org', port: 443 })?.message, /egress is switched off/)
})

t.test('bad host names are refused without resolution', async t => {
  const p = policy('open')
  for (const host of ['', 'a..b', '-x.com', 'x-.com', 'exa mple.com', 'a'.repeat(64) + '.com', 'x.com:80', 'ä.com']) {
    t.match(precheck(p, { host, port: 80 }), { allow: false, reason: 'bad-host' }, JSON.stringify(host))
  }
})

t.test('rule parsing names every bad entry and caps the list', async t => {
  t.throws(() => parseRules('ok.com, *bad.com, 10.0.0.0/33, x.com:0, [fd00::1, foo.*.com'),
    /'\*bad\.com'.*'10\.0\.0\.0\/33'.*'x\.com:0'.*'\[fd00::1'.*'foo\.\*\.com'/)
  t.throws(() => parseRules(Array.from({ length: 257 }, (_, i) => `h${i}.com`)), /at most 256/)
  t.same(parseRules(' \n ').length, 0)
  t.match(parseRules('fd00::1')[0], { kind: 'cidr' }, 'a bare IPv6 address without port')
  t.match(parseRules('[fd00::1]:8080')[0], { kind: 'cidr', port: 8080 })
})
