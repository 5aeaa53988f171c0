import type { FastifyBaseLogger } from 'fastify'
import { formatIp, parseIp } from './addresses.js'
import { periodic, readUpTo } from './host-addresses.js'

/*
 * /etc/hosts for the proxy's resolver. The proxy resolves with c-ares, which (unlike the system's
 * getaddrinfo) does not read the hosts file; names an operator pins there (a mirror, a Compose
 * `extra_hosts` entry) keep working because the proxy looks them up here first, as the system does
 * ("files" before "dns"). `localhost` is the loopback addresses even without a hosts file. The file is
 * read (at most MAX_HOSTS_FILE bytes) when the proxy starts and again every refreshMs in the
 * background; a lookup never waits for the disk.
 */

export const MAX_HOSTS_FILE = 1024 * 1024
const MAX_NAMES = 65536

export type HostsTable = ReadonlyMap<string, readonly string[]>

const BUILT_IN: ReadonlyArray<[string, string[]]> = [['localhost', ['127.0.0.1', '::1']]]

/** name (lower case, no trailing dot) → every address the file gives it, in file order (at most 16), as getaddrinfo answers. */
export function parseHosts (text: string): Map<string, string[]> {
  const table = new Map<string, string[]>()
  for (const raw of text.split('\n')) {
    const hash = raw.indexOf('#')
    const fields = (hash < 0 ? raw : raw.slice(0, hash)).trim().split(/\s+/)
    if (fields.length < 2) continue
    const ip = parseIp(fields[0] ?? '')
    if (ip === null || (fields[0] ?? '').startsWith('[')) continue
    const address = formatIp(ip)
    for (const name of fields.slice(1)) {
      const key = name.toLowerCase().replace(/\.$/, '')
      if (key === '' || key.length > 253) continue
      const list = table.get(key)
      if (list === undefined) {
        if (table.size >= MAX_NAMES) continue
        table.set(key, [address])
      } else if (!list.includes(address) && list.length < 16) list.push(address)
    }
  }
  for (const [name, addresses] of BUILT_IN) if (!table.has(name)) table.set(name, addresses)
  return table
}

export interface HostsFile {
  table: () => HostsTable
  start: () => Promise<void>
  close: () => void
}

export function createHostsFile (opts: { path: string, refreshMs?: number, log: FastifyBaseLogger }): HostsFile {
  let table: HostsTable = parseHosts('')
  let warned = false
  const refresh = async (): Promise<void> => {
    if (opts.path === '') return
    try {
      const found = await readUpTo(opts.path, MAX_HOSTS_FILE)
      table = parseHosts(found?.text ?? '')
      if (found?.truncated === true && !warned) { warned = true; opts.log.warn({ file: opts.path, maxBytes: MAX_HOSTS_FILE }, 'egress: hosts file larger than the bound, only its start is used') }
    } catch (err) {
      if (!warned) { warned = true; opts.log.warn({ err, file: opts.path }, 'egress: cannot read the hosts file; names resolve through DNS only') }
    }
  }
  return { table: () => table, ...periodic(refresh, opts.refreshMs ?? 30_000) }
}
