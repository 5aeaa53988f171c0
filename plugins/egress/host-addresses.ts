import { open } from 'node:fs/promises'
import { networkInterfaces } from 'node:os'
import { join } from 'node:path'
import type { FastifyBaseLogger } from 'fastify'
import { addressSet, formatIp, type HostSet } from './addresses.js'

/*
 * The server host's own addresses (the `host` address class), from the routing table rather than
 * from the interfaces Node lists: libuv skips interfaces that are down or have no carrier (an idle
 * Docker bridge, a VPN interface between sessions), yet the kernel still accepts connections to
 * their addresses as local. On Linux:
 *   /proc/net/fib_trie   every IPv4 route of type LOCAL (an address, or a local range such as
 *                        127.0.0.0/8 or an AnyIP route), whatever the state of its interface;
 *   /proc/net/if_inet6   every IPv6 address configured on any interface, up or down.
 * Both are read (at most MAX_PROC_FILE bytes each, at most MAX_ENTRIES kept) when the proxy starts
 * and every refreshMs after, in the background: a connection never waits for /proc. Node's own list
 * is always added, and is all there is where /proc is unreadable (not Linux).
 */

export const MAX_PROC_FILE = 8 * 1024 * 1024
export const MAX_ENTRIES = 65536

/** The text of a file read up to max bytes (files under /proc report size 0, so read until EOF); null when absent. */
export async function readUpTo (path: string, max: number): Promise<{ text: string, truncated: boolean } | null> {
  let handle
  try {
    handle = await open(path, 'r')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw err
  }
  try {
    const buf = Buffer.alloc(Math.min(max + 1, 256 * 1024))
    const parts: Buffer[] = []
    let total = 0
    for (;;) {
      const { bytesRead } = await handle.read(buf, 0, Math.min(buf.length, max + 1 - total), null)
      if (bytesRead === 0) break
      parts.push(Buffer.from(buf.subarray(0, bytesRead)))
      total += bytesRead
      if (total > max) break
    }
    const all = Buffer.concat(parts)
    return { text: all.subarray(0, max).toString('latin1'), truncated: total > max }
  } finally { await handle.close() }
}

/**
 * The LOCAL routes of /proc/net/fib_trie as CIDRs ("172.17.0.1/32", "127.0.0.0/8"). A leaf line
 * `|-- a.b.c.d` is followed by its routes, one per line: `/prefix scope TYPE`.
 */
export function parseFibTrie (text: string, max = MAX_ENTRIES): string[] {
  const out = new Set<string>()
  let leaf: string | null = null
  for (const raw of text.split('\n')) {
    const line = raw.trim()
    if (line.startsWith('|-- ')) {
      leaf = line.slice(4).trim()
      continue
    }
    if (line.startsWith('+-- ') || line.endsWith(':')) { leaf = null; continue }
    if (leaf === null || !line.startsWith('/')) continue
    const m = /^\/(\d{1,2}) \S+ (\S+)$/.exec(line)
    if (m === null || m[2] !== 'LOCAL') continue
    out.add(`${leaf}/${m[1] ?? '32'}`)
    if (out.size >= max) break
  }
  return [...out]
}

/** The addresses of /proc/net/if_inet6: `<32 hex digits> <ifindex> <prefix> <scope> <flags> <name>` per line. */
export function parseIfInet6 (text: string, max = MAX_ENTRIES): string[] {
  const out = new Set<string>()
  for (const line of text.split('\n')) {
    const hex = line.trim().split(/\s+/, 1)[0] ?? ''
    if (!/^[0-9a-fA-F]{32}$/.test(hex)) continue
    out.add(formatIp({ family: 6, value: BigInt(`0x${hex}`) }))
    if (out.size >= max) break
  }
  return [...out]
}

/** Runs refresh once (awaited by start(), shared by every caller), then every ms in the background (unref'd). */
export function periodic (refresh: () => Promise<void>, ms: number): { start: () => Promise<void>, close: () => void } {
  let timer: NodeJS.Timeout | undefined
  let started: Promise<void> | null = null
  return {
    start: async () => {
      started ??= refresh().then(() => {
        timer = setInterval(() => { refresh().catch(() => {}) }, ms)
        timer.unref()
      })
      await started
    },
    close: () => { clearInterval(timer); started = null }
  }
}

function nodeInterfaces (): string[] {
  return Object.values(networkInterfaces()).flatMap(list => (list ?? []).map(i => i.address))
}

export interface HostAddresses {
  /** the set in force (Node's interface list until the first read of /proc) */
  current: () => HostSet
  /** re-reads /proc now; a failure is logged and the previous set stays */
  refresh: () => Promise<void>
  /** the first refresh, then one every refreshMs (unref'd) */
  start: () => Promise<void>
  close: () => void
}

export function createHostAddresses (opts: { procDir?: string, refreshMs?: number, log: FastifyBaseLogger }): HostAddresses {
  const procDir = opts.procDir ?? '/proc'
  const refreshMs = opts.refreshMs ?? 10_000
  let set = addressSet(nodeInterfaces())
  const warned = new Set<string>()
  const warnOnce = (key: string, obj: object, msg: string): void => {
    if (warned.has(key)) return
    warned.add(key)
    opts.log.warn(obj, msg)
  }
  const read = async (name: string, parse: (text: string) => string[]): Promise<string[]> => {
    const path = join(procDir, 'net', name)
    try {
      const found = await readUpTo(path, MAX_PROC_FILE)
      if (found === null) return []
      if (found.truncated) warnOnce(`big-${name}`, { file: path, maxBytes: MAX_PROC_FILE }, 'egress: routing file larger than the bound, only its start is used for the host addresses')
      return parse(found.text)
    } catch (err) {
      warnOnce(`err-${name}`, { err, file: path }, 'egress: cannot read the routing table; host addresses from the interfaces Node lists only')
      return []
    }
  }
  const refresh = async (): Promise<void> => {
    const [v4, v6] = await Promise.all([read('fib_trie', parseFibTrie), read('if_inet6', parseIfInet6)])
    set = addressSet([...v4, ...v6, ...nodeInterfaces()])
  }
  return { current: () => set, refresh, ...periodic(refresh, refreshMs) }
}
