import { classify, DESCRIPTION, embeddedV4, formatIp, parseIp, SEVERITY, type AddressClass, type HostSet, type Ip } from './addresses.js'
import { matchAddress, matchName, normalizeName, type Rule } from './rules.js'

/*
 * The egress policy as pure functions. The proxy asks twice per connection:
 *   precheck(target)          before DNS: refuses what no resolution could make allowed (mode off,
 *                             allowlist names that match nothing), so denied names are not even resolved;
 *   decide(target, address)   for the exact address about to be dialled (after DNS; no rebinding).
 *
 * Modes: `open` allows public addresses; `allowlist` allows only names/addresses matching a rule;
 * `off` allows nothing. In every mode an address rule (IP/CIDR) allows its addresses, a name rule
 * also allows private addresses its name resolves to (an internal mirror), and sensitive classes
 * (loopback, link-local, metadata, multicast, the host's own addresses) need an address rule.
 */

export type EgressMode = 'open' | 'allowlist' | 'off'
export const MODES: readonly EgressMode[] = ['open', 'allowlist', 'off']

export interface Policy {
  mode: EgressMode
  rules: readonly Rule[]
  /** the server host's own addresses (addressSet) */
  hostAddresses: HostSet
}

export interface Target {
  /** as the client asked: a host name or an IP literal (IPv6 with or without brackets) */
  host: string
  port: number
}

export interface Decision {
  allow: boolean
  /** machine-readable reason */
  reason: 'public' | 'rule' | 'name-rule' | 'off' | 'not-allowlisted' | 'address-class' | 'bad-host'
  /** for refusals: the text the sandbox's client shows ("blocked by the sandbox egress policy: …") */
  message: string
  /** the rule that allowed the connection, as written */
  rule?: string
  addressClass?: AddressClass
}

export const BLOCKED = 'blocked by the sandbox egress policy'

const deny = (reason: Decision['reason'], text: string, addressClass?: AddressClass): Decision =>
  ({ allow: false, reason, message: `${BLOCKED}: ${text}`, ...(addressClass === undefined ? {} : { addressClass }) })

/** The target's host as a name (normalized) or an address; null when it is neither. */
export function parseHost (host: string): { name: string } | { ip: Ip } | null {
  const ip = parseIp(host)
  if (ip !== null) return { ip: unmap(ip) }
  const name = normalizeName(host)
  return name === null ? null : { name }
}

/** ::ffff:a.b.c.d is dialled as a.b.c.d: treat it as that IPv4 address everywhere. */
function unmap (ip: Ip): Ip {
  return ip.family === 6 && ip.value >> 32n === 0xffffn ? (embeddedV4(ip) ?? ip) : ip
}

/** Before DNS: null when resolution may go ahead, else the refusal. */
export function precheck (policy: Policy, target: Target): Decision | null {
  if (policy.mode === 'off') return deny('off', 'egress is switched off for this sandbox')
  const host = parseHost(target.host)
  if (host === null) return deny('bad-host', `'${target.host.slice(0, 100)}' is not a valid host name`)
  if (policy.mode !== 'allowlist' || 'ip' in host) return null
  if (matchName(policy.rules, host.name, target.port) !== undefined) return null
  if (policy.rules.some(r => r.kind === 'cidr')) return null // an address rule may still match after resolution
  return deny('not-allowlisted', `${host.name}:${target.port} is not on the egress allowlist`)
}

/** For the address about to be dialled: allow or refuse with a message naming the host and the class. */
export function decide (policy: Policy, target: Target, address: string): Decision {
  const pre = precheck(policy, target)
  if (pre !== null) return pre
  const host = parseHost(target.host)
  const parsed = parseIp(address)
  if (host === null || parsed === null) return deny('bad-host', `'${address.slice(0, 100)}' is not a valid address`, 'invalid')
  const ip = unmap(parsed)
  const cls = classify(ip, policy.hostAddresses)
  const shown = 'name' in host ? `${host.name} (${formatIp(ip)})` : formatIp(ip)
  const byAddress = matchAddress(policy.rules, ip, target.port)
  if (byAddress !== undefined) return { allow: true, reason: 'rule', message: 'allowed by an address rule', rule: byAddress.text, addressClass: cls }
  const byName = 'name' in host ? matchName(policy.rules, host.name, target.port) : undefined
  const severity = SEVERITY[cls]
  if (severity === 'sensitive') {
    return deny('address-class', `${shown} is ${DESCRIPTION[cls]}; only an explicit address rule in EGRESS_ALLOW can allow it`, cls)
  }
  if (byName !== undefined) return { allow: true, reason: 'name-rule', message: 'allowed by a name rule', rule: byName.text, addressClass: cls }
  if (severity === 'private') return deny('address-class', `${shown} is ${DESCRIPTION[cls]}`, cls)
  if (policy.mode === 'open') return { allow: true, reason: 'public', message: 'public address', addressClass: cls }
  return deny('not-allowlisted', `${'name' in host ? host.name : formatIp(ip)}:${target.port} is not on the egress allowlist`, cls)
}
