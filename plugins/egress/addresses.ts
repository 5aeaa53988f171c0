import { isIP } from 'node:net'

/*
 * Address classes of the egress policy (pure, no I/O). Every address a sandbox's connection would
 * dial is classified here after DNS resolution; IPv6 forms that embed an IPv4 address (mapped,
 * compatible, NAT64, 6to4) are classified by the embedded address, so `::ffff:127.0.0.1` is loopback.
 *
 * `sensitive` classes (loopback, link-local and metadata, multicast, unspecified, the host's own
 * addresses) are only ever reached through an explicit address rule (IP or CIDR); `private` classes
 * (RFC 1918, CGNAT, ULA, reserved ranges) also through a matching domain rule.
 */

export type AddressClass =
  | 'public' | 'loopback' | 'private' | 'cgnat' | 'link-local' | 'metadata' | 'multicast'
  | 'unspecified' | 'broadcast' | 'reserved' | 'host' | 'invalid'

export type Severity = 'public' | 'private' | 'sensitive'

export const SEVERITY: Record<AddressClass, Severity> = {
  public: 'public',
  private: 'private',
  cgnat: 'private',
  reserved: 'private',
  loopback: 'sensitive',
  'link-local': 'sensitive',
  metadata: 'sensitive',
  multicast: 'sensitive',
  unspecified: 'sensitive',
  broadcast: 'sensitive',
  host: 'sensitive',
  invalid: 'sensitive'
}

/** Human words for refusal messages: "<host> is <description>". */
export const DESCRIPTION: Record<AddressClass, string> = {
  public: 'a public address',
  private: 'a private address',
  cgnat: 'a carrier-grade NAT address (100.64.0.0/10)',
  reserved: 'a reserved address',
  loopback: 'a loopback address',
  'link-local': 'a link-local address',
  metadata: 'a cloud metadata address',
  multicast: 'a multicast address',
  unspecified: 'the unspecified address',
  broadcast: 'the broadcast address',
  host: "one of the server host's own addresses",
  invalid: 'not a valid address'
}

/** An address as a 128-bit integer plus its family; IPv4 lives in the low 32 bits. */
export interface Ip { family: 4 | 6, value: bigint }

function parseV4 (text: string): bigint | null {
  const parts = text.split('.')
  if (parts.length !== 4) return null
  let v = 0n
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p)) return null
    const n = Number(p)
    if (n > 255) return null
    v = (v << 8n) | BigInt(n)
  }
  return v
}

function parseV6 (text: string): bigint | null {
  let s = text
  const zone = s.indexOf('%')
  if (zone >= 0) s = s.slice(0, zone)
  let tailV4: bigint | null = null
  const lastColon = s.lastIndexOf(':')
  if (s.includes('.', lastColon)) {
    tailV4 = parseV4(s.slice(lastColon + 1))
    if (tailV4 === null) return null
    s = s.slice(0, lastColon + 1) + '0:0'
  }
  const halves = s.split('::')
  if (halves.length > 2) return null
  const head = halves[0] === '' ? [] : (halves[0] ?? '').split(':')
  const tail = halves.length === 2 ? (halves[1] === '' ? [] : (halves[1] ?? '').split(':')) : []
  const fill = 8 - head.length - tail.length
  if (halves.length === 1 ? fill !== 0 : fill < 1) return null
  const groups = [...head, ...Array<string>(halves.length === 2 ? fill : 0).fill('0'), ...tail]
  let v = 0n
  for (const g of groups) {
    if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return null
    v = (v << 16n) | BigInt(parseInt(g, 16))
  }
  if (tailV4 !== null) v = (v & ~0xffffffffn) | tailV4
  return v
}

/** Parses a literal IPv4 or IPv6 address (brackets and zone ids accepted); null when it is not one. */
export function parseIp (text: string): Ip | null {
  const t = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text
  if (t.length > 64) return null
  const kind = isIP(t.split('%')[0] ?? '')
  if (kind === 4) { const v = parseV4(t); return v === null ? null : { family: 4, value: v } }
  if (kind === 6) { const v = parseV6(t); return v === null ? null : { family: 6, value: v } }
  return null
}

export function formatIp (ip: Ip): string {
  if (ip.family === 4) return [24n, 16n, 8n, 0n].map(s => String((ip.value >> s) & 0xffn)).join('.')
  const groups: string[] = []
  for (let s = 112n; s >= 0n; s -= 16n) groups.push(((ip.value >> s) & 0xffffn).toString(16))
  return groups.join(':').replace(/(^|:)0(:0)+(:|$)/, '::').replace(/:{3,}/, '::')
}

/** A CIDR block; `bits` counts from the top of the family's width. */
export interface Cidr { family: 4 | 6, base: bigint, bits: number }

export function parseCidr (text: string): Cidr | null {
  const slash = text.indexOf('/')
  const ip = parseIp(slash < 0 ? text : text.slice(0, slash))
  if (ip === null) return null
  const width = ip.family === 4 ? 32 : 128
  const bitsText = slash < 0 ? String(width) : text.slice(slash + 1)
  if (!/^\d{1,3}$/.test(bitsText)) return null
  const bits = Number(bitsText)
  if (bits > width) return null
  return { family: ip.family, base: ip.value & mask(width, bits), bits }
}

function mask (width: number, bits: number): bigint {
  const all = (1n << BigInt(width)) - 1n
  return bits === 0 ? 0n : all ^ ((1n << BigInt(width - bits)) - 1n)
}

export function inCidr (ip: Ip, cidr: Cidr): boolean {
  if (ip.family !== cidr.family) return false
  const width = ip.family === 4 ? 32 : 128
  return (ip.value & mask(width, cidr.bits)) === cidr.base
}

const c = (text: string): Cidr => {
  const parsed = parseCidr(text)
  if (parsed === null) throw new TypeError(`bad built-in CIDR ${text}`)
  return parsed
}

const V4_TABLE: Array<[Cidr, AddressClass]> = [
  [c('169.254.169.254/32'), 'metadata'], // AWS, GCP, Azure, OpenStack, DigitalOcean, …
  [c('100.100.100.200/32'), 'metadata'], // Alibaba Cloud
  [c('255.255.255.255/32'), 'broadcast'],
  [c('0.0.0.0/8'), 'unspecified'],
  [c('127.0.0.0/8'), 'loopback'],
  [c('10.0.0.0/8'), 'private'],
  [c('172.16.0.0/12'), 'private'],
  [c('192.168.0.0/16'), 'private'],
  [c('100.64.0.0/10'), 'cgnat'],
  [c('169.254.0.0/16'), 'link-local'],
  [c('224.0.0.0/4'), 'multicast'],
  [c('240.0.0.0/4'), 'reserved'],
  [c('192.0.0.0/24'), 'reserved'], // IETF protocol assignments
  [c('192.0.2.0/24'), 'reserved'], // TEST-NET-1
  [c('198.51.100.0/24'), 'reserved'], // TEST-NET-2
  [c('203.0.113.0/24'), 'reserved'], // TEST-NET-3
  [c('198.18.0.0/15'), 'reserved'], // benchmarking
  [c('192.88.99.0/24'), 'reserved'] // deprecated 6to4 relay anycast
]

const V6_TABLE: Array<[Cidr, AddressClass]> = [
  [c('fd00:ec2::254/128'), 'metadata'], // AWS IMDS over IPv6
  [c('::/128'), 'unspecified'],
  [c('::1/128'), 'loopback'],
  [c('fe80::/10'), 'link-local'],
  [c('fec0::/10'), 'private'], // deprecated site-local
  [c('fc00::/7'), 'private'], // unique local
  [c('ff00::/8'), 'multicast'],
  [c('64:ff9b:1::/48'), 'private'], // local-use NAT64
  [c('100::/64'), 'reserved'], // discard-only
  [c('2001:db8::/32'), 'reserved'], // documentation
  [c('2001::/32'), 'reserved'], // Teredo: the real destination is hidden
  [c('2001:10::/28'), 'reserved'], // ORCHID
  [c('::/96'), 'reserved'] // deprecated IPv4-compatible
]

/** The IPv4 address an IPv6 address stands for (mapped, NAT64 well-known prefix, 6to4), or null. */
export function embeddedV4 (ip: Ip): Ip | null {
  if (ip.family !== 6) return null
  const v = ip.value
  if (v >> 32n === 0xffffn) return { family: 4, value: v & 0xffffffffn } // ::ffff:a.b.c.d
  if (v >> 32n === 0x0064ff9b0000000000000000n) return { family: 4, value: v & 0xffffffffn } // 64:ff9b::/96
  if (v >> 112n === 0x2002n) return { family: 4, value: (v >> 80n) & 0xffffffffn } // 2002:AABB:CCDD::/48
  return null
}

function key (ip: Ip): string { return `${ip.family}:${ip.value.toString(16)}` }

/** The server host's own addresses for `classify`: single addresses and local ranges (such as 127.0.0.0/8 or an AnyIP route). */
export interface HostSet {
  readonly exact: ReadonlySet<string>
  readonly ranges: readonly Cidr[]
}

/** Host address set for `classify` from addresses and CIDRs (see host-addresses.ts); unparsable entries are skipped. */
export function addressSet (addresses: Iterable<string>): HostSet {
  const exact = new Set<string>()
  const ranges: Cidr[] = []
  for (const a of addresses) {
    if (a.includes('/')) {
      const cidr = parseCidr(a)
      if (cidr === null) continue
      if (cidr.bits === (cidr.family === 4 ? 32 : 128)) exact.add(key({ family: cidr.family, value: cidr.base }))
      else ranges.push(cidr)
      continue
    }
    const ip = parseIp(a)
    if (ip !== null) exact.add(key(ip))
  }
  return { exact, ranges }
}

const NO_HOST: HostSet = { exact: new Set(), ranges: [] }

function isHost (ip: Ip, host: HostSet): boolean {
  return host.exact.has(key(ip)) || host.ranges.some(r => inCidr(ip, r))
}

/** Classifies a literal address; `host` holds the server's own addresses (addressSet). */
export function classify (address: string | Ip, host: HostSet = NO_HOST): AddressClass {
  const ip = typeof address === 'string' ? parseIp(address) : address
  if (ip === null) return 'invalid'
  const v4 = embeddedV4(ip)
  if (v4 !== null) {
    const inner = classify(v4, host)
    // ::ffff:0.0.0.0 and friends stay unspecified; a public v4 behind 6to4/NAT64 is public.
    return inner
  }
  const cls = tableClass(ip)
  // The host's own addresses: named so unless a more specific sensitive class already applies (loopback, link-local).
  return SEVERITY[cls] !== 'sensitive' && isHost(ip, host) ? 'host' : cls
}

function tableClass (ip: Ip): AddressClass {
  for (const [cidr, cls] of ip.family === 4 ? V4_TABLE : V6_TABLE) {
    if (inCidr(ip, cidr)) return cls
  }
  if (ip.family === 6 && (ip.value >> 125n) !== 1n) return 'reserved' // outside 2000::/3, not yet allocated
  return 'public'
}
