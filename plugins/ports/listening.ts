import type { ListeningSocket } from '../sandbox/types.js'

/*
 * Which ports of a sandbox can be opened as apps: the TCP sockets in LISTEN state of its network
 * namespace (the in-sandbox agent's socket listing, else /proc/net/tcp and /proc/net/tcp6 read inside
 * it), bound where 127.0.0.1 reaches them (0.0.0.0, 127.0.0.1, ::, ::ffff:127.0.0.1), in the app range.
 * The text comes from the sandbox: it is parsed line by line with fixed-position splits, bounded in
 * lines and length; the agent's listing is checked by the sandbox core (agent-files.ts).
 */

const LISTEN = '0A'
const REACHABLE = new Set(['00000000', '0100007F', '00000000000000000000000000000000', '0000000000000000FFFF00000100007F'])
export const MIN_PORT = 1024
export const MAX_PORT = 65535

/** The ports listening for 127.0.0.1 in `text` (any number of /proc/net/tcp* tables), sorted, without `hidden`. */
export function parseListening (text: string, hidden: ReadonlySet<number> = new Set(), maxLines = 8192): number[] {
  const ports = new Set<number>()
  let lines = 0
  for (const line of text.split('\n')) {
    if (++lines > maxLines) break
    if (line.length > 512) continue
    const fields = line.trim().split(' ').filter(f => f !== '')
    const local = fields[1]
    if (fields[3] !== LISTEN || local === undefined) continue
    const colon = local.indexOf(':')
    if (colon < 0 || !REACHABLE.has(local.slice(0, colon).toUpperCase())) continue
    const hex = local.slice(colon + 1)
    if (!/^[0-9A-Fa-f]{4}$/.test(hex)) continue
    const port = parseInt(hex, 16)
    if (port >= MIN_PORT && port <= MAX_PORT && !hidden.has(port)) ports.add(port)
  }
  return [...ports].sort((a, b) => a - b)
}

const REACHABLE_ADDRESS = new Set(['0.0.0.0', '127.0.0.1', '::', '::ffff:127.0.0.1'])

/** The same from the agent's socket listing. */
export function listeningPorts (sockets: readonly ListeningSocket[], hidden: ReadonlySet<number> = new Set()): number[] {
  const ports = new Set<number>()
  for (const s of sockets) {
    if (REACHABLE_ADDRESS.has(s.address) && s.port >= MIN_PORT && s.port <= MAX_PORT && !hidden.has(s.port)) ports.add(s.port)
  }
  return [...ports].sort((a, b) => a - b)
}

/** A port path segment as a number in the app range, else undefined. */
export function appPort (segment: string): number | undefined {
  if (!/^[1-9][0-9]{3,4}$/.test(segment)) return undefined
  const port = Number(segment)
  return port >= MIN_PORT && port <= MAX_PORT ? port : undefined
}
