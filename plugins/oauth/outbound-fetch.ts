import { Resolver } from 'node:dns/promises'
import type { IncomingMessage } from 'node:http'
import { request } from 'node:https'
import { BlockList, isIP, type LookupFunction } from 'node:net'

/*
 * The authorization server's only way out to the network: the `fetch` oidc-provider uses for Client
 * ID Metadata Documents (docs/contract.md#oauth). A client_id URL is chosen by whoever sends an
 * authorization request, so this fetch is built against server-side request forgery:
 *
 * - https only, no credentials in the URL, GET only, no redirects (a 3xx is returned, not followed);
 * - the host name is resolved here, with c-ares (cancellable, off libuv's thread pool), and only a
 *   public unicast address is used: loopback, private, link-local, cloud metadata, CGNAT, multicast,
 *   documentation and other special-use ranges (and IPv6 forms embedding such an IPv4 address) are
 *   refused; the connection is then made to exactly that address (the lookup is pinned), so a second
 *   DNS answer cannot move it elsewhere (DNS rebinding); TLS still checks the certificate for the name;
 * - one deadline for everything (DNS, connect, TLS, headers, body), at most `maxBytes` of body, at
 *   most 16 KiB of headers, a fresh connection per fetch (no pooled socket is ever reused).
 */

/** A vetted address to connect to for a host name; throws when there is none. */
export type ResolveHost = (hostname: string, signal: AbortSignal) => Promise<{ address: string, family: 4 | 6 }>

export interface OutboundFetchOptions {
  /** Largest body read, in bytes; a longer one (or a Content-Length over it) fails the fetch. */
  maxBytes: number
  /** Deadline of the whole fetch, in milliseconds. */
  timeoutMs: number
  /** Where a host name connects to; default `publicAddress` (public unicast addresses only). */
  resolve?: ResolveHost
  /** Extra trusted CA certificates (PEM) beside the system's. */
  ca?: string
}

export type OutboundFetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>

const SPECIAL_V4: Array<[string, number]> = [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.88.99.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15],
  ['198.51.100.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4]
]
// Node's BlockList also applies the IPv4 ranges to IPv4-mapped IPv6 addresses (::ffff:127.0.0.1);
// NAT64 and 6to4 embed an IPv4 address that could be anything, so they are refused whole.
const SPECIAL_V6: Array<[string, number]> = [
  ['::', 96], ['64:ff9b::', 96], ['64:ff9b:1::', 48], ['100::', 64], ['2001::', 23], ['2001:db8::', 32],
  ['2002::', 16], ['3fff::', 20], ['5f00::', 16], ['fc00::', 7], ['fe80::', 10], ['fec0::', 10], ['ff00::', 8]
]
const special = new BlockList()
for (const [net, bits] of SPECIAL_V4) special.addSubnet(net, bits, 'ipv4')
for (const [net, bits] of SPECIAL_V6) special.addSubnet(net, bits, 'ipv6')

/** True for a literal public unicast address (IPv6 outside 2000::/3 is not allocated: refused). */
export function isPublicAddress (address: string): boolean {
  const family = isIP(address)
  if (family === 0) return false
  if (special.check(address, family === 4 ? 'ipv4' : 'ipv6')) return false
  if (family === 4 || address.toLowerCase().startsWith('::ffff:')) return true
  // 2000::/3: the first 16-bit group is 0x2000-0x3fff.
  const first = parseInt(address.slice(0, address.indexOf(':')) || '0', 16)
  return first >= 0x2000 && first <= 0x3fff
}

const DNS_TRY_MS = 700

/** The first public address of `hostname` (A records first, then AAAA); refuses a name with none. */
export const publicAddress: ResolveHost = async (hostname, signal) => {
  const host = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname
  const literal = isIP(host)
  if (literal !== 0) {
    if (!isPublicAddress(host)) throw new Error(`${host} is not a public address`)
    return { address: host, family: literal === 4 ? 4 : 6 }
  }
  const resolver = new Resolver({ timeout: DNS_TRY_MS, tries: 2 })
  const cancel = (): void => { resolver.cancel() }
  signal.addEventListener('abort', cancel, { once: true })
  try {
    const seen: string[] = []
    for (const family of [4, 6] as const) {
      signal.throwIfAborted()
      const addresses = await (family === 4 ? resolver.resolve4(host) : resolver.resolve6(host)).catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'ENODATA' || err.code === 'ENOTFOUND') return []
        throw new Error(`resolving ${host} failed (${err.code ?? err.message})`, { cause: err })
      })
      const usable = addresses.find(isPublicAddress)
      if (usable !== undefined) return { address: usable, family }
      seen.push(...addresses.slice(0, 4))
    }
    throw new Error(seen.length === 0 ? `${host} has no address` : `${host} resolves only to special-use addresses (${seen.join(', ')})`)
  } finally { signal.removeEventListener('abort', cancel) }
}

/** The socket of a fetch connects to `address` whatever name it was asked for. */
function pinned (address: string, family: 4 | 6): LookupFunction {
  return (_hostname, options, callback) => {
    if (options.all === true) (callback as (err: null, all: Array<{ address: string, family: number }>) => void)(null, [{ address, family }])
    else callback(null, address, family)
  }
}

async function readBounded (res: IncomingMessage, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of res as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size > maxBytes) {
      res.destroy()
      throw new Error(`the response is over ${maxBytes} bytes`)
    }
    chunks.push(chunk)
  }
  return Buffer.concat(chunks)
}

function headersOf (res: IncomingMessage): Headers {
  const headers = new Headers()
  for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
    try { headers.append(res.rawHeaders[i] ?? '', res.rawHeaders[i + 1] ?? '') } catch {} // a header fetch would refuse is dropped
  }
  return headers
}

export function createOutboundFetch (opts: OutboundFetchOptions): OutboundFetch {
  const resolveHost = opts.resolve ?? publicAddress
  return async (input, init = {}) => {
    if (input instanceof Request) throw new TypeError('pass a URL, not a Request')
    const url = new URL(String(input))
    if (url.protocol !== 'https:') throw new TypeError(`only https URLs are fetched, not ${url.protocol}`)
    if (url.username !== '' || url.password !== '') throw new TypeError('a URL with credentials is not fetched')
    const method = (init.method ?? 'GET').toUpperCase()
    if (method !== 'GET') throw new TypeError(`only GET requests are sent, not ${method}`)
    const deadline = AbortSignal.timeout(opts.timeoutMs)
    const signal = init.signal == null ? deadline : AbortSignal.any([deadline, init.signal])
    const headers: Record<string, string> = {}
    for (const [name, value] of new Headers(init.headers)) if (value !== '') headers[name] = value
    // The deadline holds even for a resolver that does not watch the signal.
    const { address, family } = await Promise.race([resolveHost(url.hostname, signal), new Promise<never>((_resolve, reject) => {
      signal.addEventListener('abort', () => { reject(new Error(`no address within ${opts.timeoutMs} ms`)) }, { once: true })
    })])
    signal.throwIfAborted()
    return await new Promise<Response>((resolve, reject) => {
      const req = request({
        host: url.hostname,
        port: url.port === '' ? 443 : Number(url.port),
        path: `${url.pathname}${url.search}`,
        method,
        headers,
        lookup: pinned(address, family),
        agent: false,
        maxHeaderSize: 16 * 1024,
        signal,
        ...(opts.ca === undefined ? {} : { ca: opts.ca })
      }, res => {
        const status = res.statusCode ?? 0
        if (status < 200 || status > 599) { res.destroy(); reject(new Error(`unexpected HTTP status ${status}`)); return }
        // Only a 200 is ever read: a redirect or an error status is answered without its body.
        if (status !== 200) { res.destroy(); resolve(new Response(null, { status, headers: headersOf(res) })); return }
        const length = Number(res.headers['content-length'])
        if (Number.isFinite(length) && length > opts.maxBytes) { res.destroy(); reject(new Error(`the response is ${length} bytes, over ${opts.maxBytes}`)); return }
        readBounded(res, opts.maxBytes).then(body => {
          resolve(new Response(new Uint8Array(body), { status, headers: headersOf(res) }))
        }, reject)
      })
      req.once('error', err => { reject(signal.aborted ? new Error(`no complete answer within ${opts.timeoutMs} ms`, { cause: err }) : err) })
      req.end()
    })
  }
}
