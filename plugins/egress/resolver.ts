import { Resolver } from 'node:dns/promises'
import { parseIp } from './addresses.js'
import type { HostsTable } from './hosts-file.js'

/*
 * Name resolution for the proxy, with c-ares (node:dns Resolver) instead of getaddrinfo: getaddrinfo
 * runs on libuv's thread pool (4 threads shared with the file system, at most 2 of them for DNS) and
 * cannot be cancelled, so names whose DNS never answers from one sandbox used to stall every other
 * chat's lookups and the server's own. c-ares works on the event loop with sockets, so a lookup costs
 * one socket and a timer, and is cancelled when the client goes away or its deadline passes.
 *
 * Each lookup gets its own Resolver (about 60 µs to make), so cancelling it cancels only that
 * lookup. A and AAAA are asked in parallel; once one family has answered, the other gets
 * FAMILY_GRACE_MS more (a server that drops AAAA queries must not cost the whole deadline); IPv4
 * addresses come first. Names in the hosts file (hosts-file.ts) answer from it without DNS. The
 * resolver applies no search domains (`search` in resolv.conf): a sandbox asks for full names.
 */

export type Lookup = (host: string, signal?: AbortSignal) => Promise<string[]>

export interface ResolverOptions {
  /** DNS servers ("192.0.2.53", "192.0.2.53:5353", "[2001:db8::53]:53"); empty: those of /etc/resolv.conf */
  servers: readonly string[]
  /** the whole lookup (both families, every try) */
  timeoutMs: number
  hosts?: () => HostsTable
}

export const FAMILY_GRACE_MS = 250
const MAX_ADDRESSES = 16

export function dnsError (code: string, message: string): NodeJS.ErrnoException {
  return Object.assign(new Error(message), { code })
}

/** Throws a clear error for a server list c-ares refuses (checked at boot). */
export function checkServers (servers: readonly string[]): void {
  if (servers.length === 0) return
  new Resolver().setServers([...servers])
}

/** Splits EGRESS_DNS_SERVERS (comma or space separated). */
export function parseServers (text: string): string[] {
  return text.split(/[\s,]+/).filter(s => s !== '')
}

export function createResolver (opts: ResolverOptions): Lookup {
  // c-ares waits `timeout` for the first try and twice that for the second: together the deadline.
  const perTry = Math.max(100, Math.floor(opts.timeoutMs / 3))
  return async (host, signal) => {
    const literal = parseIp(host)
    if (literal !== null) return [host.startsWith('[') ? host.slice(1, -1) : host]
    const name = host.toLowerCase().replace(/\.$/, '')
    const pinned = opts.hosts?.().get(name)
    if (pinned !== undefined && pinned.length > 0) return [...pinned]
    if (signal?.aborted === true) throw dnsError('ECANCELLED', 'lookup cancelled')
    const resolver = new Resolver({ timeout: perTry, tries: 2 })
    if (opts.servers.length > 0) resolver.setServers([...opts.servers])
    return await new Promise<string[]>((resolve, reject) => {
      const found: { 4: string[] | null, 6: string[] | null } = { 4: null, 6: null }
      const errors: { 4?: NodeJS.ErrnoException, 6?: NodeJS.ErrnoException } = {}
      let done = false
      let grace: NodeJS.Timeout | undefined
      const deadline = setTimeout(() => { finish(dnsError('ETIMEOUT', `no answer within ${opts.timeoutMs} ms`)) }, opts.timeoutMs)
      function finish (err: NodeJS.ErrnoException | null): void {
        if (done) return
        done = true
        clearTimeout(deadline)
        clearTimeout(grace)
        signal?.removeEventListener('abort', onAbort)
        resolver.cancel()
        const all = [...(found[4] ?? []), ...(found[6] ?? [])].slice(0, MAX_ADDRESSES)
        if (all.length > 0) resolve(all)
        else reject(err ?? failure(errors[4], errors[6]))
      }
      const onAbort = (): void => { finish(dnsError('ECANCELLED', 'lookup cancelled')) }
      signal?.addEventListener('abort', onAbort, { once: true })
      const settled = (family: 4 | 6): void => {
        const other = family === 4 ? 6 : 4
        const otherDone = found[other] !== null || errors[other] !== undefined
        if (otherDone) { finish(null); return }
        if ((found[family]?.length ?? 0) > 0) grace = setTimeout(() => { finish(null) }, FAMILY_GRACE_MS)
      }
      for (const family of [4, 6] as const) {
        const query = family === 4 ? resolver.resolve4(name) : resolver.resolve6(name)
        query.then(addresses => { found[family] = addresses; settled(family) }, (err: NodeJS.ErrnoException) => { errors[family] = err; settled(family) })
      }
    })
  }
}

/** One error for two failed families: "no such name" when either says so or both have no data. */
function failure (v4: NodeJS.ErrnoException | undefined, v6: NodeJS.ErrnoException | undefined): NodeJS.ErrnoException {
  const codes = [v4?.code, v6?.code]
  if (codes.includes('ENOTFOUND') || codes.every(c => c === 'ENODATA')) return dnsError('ENOTFOUND', 'no such name')
  const first = codes.find(c => c !== undefined && c !== 'ENODATA') ?? 'ENOTFOUND'
  return dnsError(first, `lookup failed: ${first}`)
}
