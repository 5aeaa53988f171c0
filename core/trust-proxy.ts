import { isIP } from 'node:net'

/*
 * TRUST_PROXY (docs/contract.md#authentication-and-origin): which X-Forwarded-For entries name the client.
 * `false` trusts none; a hop count trusts that many proxies in front of the server; a list of
 * addresses/CIDRs trusts only proxies at those addresses (each hop is checked, from the socket
 * peer backwards). A bare `true`, which would let any client forge its address, is refused.
 */

/** false: the socket address is the client; number: trusted hops; string[]: trusted proxy addresses/CIDRs. */
export type TrustProxy = false | number | string[]

const NAMED = new Set(['loopback', 'linklocal', 'uniquelocal'])

/** Checks one list entry; returns a reason when it is not an address, a CIDR or a proxy-addr range name. */
function entryProblem (entry: string): string | undefined {
  if (NAMED.has(entry)) return undefined
  const slash = entry.indexOf('/')
  const address = slash === -1 ? entry : entry.slice(0, slash)
  const family = isIP(address)
  if (family === 0) return `'${entry}' is not an IP address or CIDR`
  if (slash === -1) return undefined
  const prefix = entry.slice(slash + 1)
  const max = family === 4 ? 32 : 128
  if (!/^[0-9]{1,3}$/.test(prefix) || Number(prefix) > max) return `'${entry}' has an invalid prefix length (0–${max})`
  return undefined
}

/** Parses the raw setting; throws an Error whose message says what to write instead. */
export function parseTrustProxy (raw: string): TrustProxy {
  const value = raw.trim().toLowerCase()
  if (value === '' || value === 'false' || value === 'no' || value === '0') return false
  if (value === 'true' || value === 'yes') {
    throw new Error(`'${raw}' would trust any X-Forwarded-For a client sends; give the number of proxy hops in front of the server (e.g. 1) or the proxies' addresses/CIDRs (e.g. 10.0.0.0/8,127.0.0.1)`)
  }
  if (/^[0-9]+$/.test(value)) {
    const hops = Number(value)
    if (hops > 16) throw new Error(`'${raw}' hops is implausible; give the number of proxies in front of the server (1–16)`)
    return hops
  }
  const entries = value.split(',').map(s => s.trim()).filter(s => s !== '')
  for (const entry of entries) {
    const problem = entryProblem(entry)
    if (problem !== undefined) throw new Error(`${problem}; give false, a hop count or comma-separated addresses/CIDRs`)
  }
  return entries
}

/**
 * What Fastify's `trustProxy` gets. A hop count becomes a function: Fastify ≥ 5.12 maps a number
 * to "trust nothing", and proxy-addr's hop rule (the socket peer and the next hops-1 forwarded
 * entries are proxies) is what the setting promises.
 */
export function fastifyTrustProxy (trust: TrustProxy): boolean | string[] | ((address: string, hop: number) => boolean) {
  if (typeof trust === 'number') return (_address, hop) => hop < trust
  return trust
}
