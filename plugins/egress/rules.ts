import { inCidr, parseCidr, type Cidr, type Ip } from './addresses.js'

/*
 * Allow rules (EGRESS_ALLOW and per-chat overrides), parsed once, matched per connection. Pure.
 *
 *   pypi.org            that name, any port
 *   *.pythonhosted.org  any name below it (not the name itself)
 *   .npmjs.org          the name and any name below it
 *   10.20.0.0/16        any address in the block (also unlocks private and sensitive classes)
 *   10.20.0.5           one address; IPv6 as fd00::5 or [fd00::5]
 *   mirror.corp:3141    any of the forms above followed by :port restricts the rule to that port
 *                       (IPv6 with a port needs brackets: [fd00::5]:3141, [fd00::/64]:443)
 */

export type Rule =
  | { kind: 'name', name: string, port: number | null, text: string }
  | { kind: 'suffix', suffix: string, includeApex: boolean, port: number | null, text: string }
  | { kind: 'cidr', cidr: Cidr, port: number | null, text: string }

export const MAX_RULES = 256
const LABEL = /^(?!-)[a-z0-9_-]{1,63}(?<!-)$/

/** Lower-case, no trailing dot, valid DNS syntax (labels of letters, digits, '-' and '_'); null otherwise. */
export function normalizeName (raw: string): string | null {
  let name = raw.toLowerCase()
  if (name.endsWith('.')) name = name.slice(0, -1)
  if (name.length === 0 || name.length > 253) return null
  for (const label of name.split('.')) if (!LABEL.test(label)) return null
  return name
}

function splitPort (text: string): { host: string, port: number | null } | string {
  if (text.startsWith('[')) {
    const end = text.indexOf(']')
    if (end < 0) return 'unclosed ['
    const rest = text.slice(end + 1)
    if (rest === '') return { host: text.slice(1, end), port: null }
    if (!rest.startsWith(':')) return 'unexpected text after ]'
    const port = parsePort(rest.slice(1))
    return port === null ? 'bad port' : { host: text.slice(1, end), port }
  }
  const colons = text.split(':').length - 1
  if (colons !== 1) return { host: text, port: null } // none, or a bare IPv6 address/block
  const [host = '', portText = ''] = text.split(':')
  const port = parsePort(portText)
  return port === null ? 'bad port' : { host, port }
}

function parsePort (text: string): number | null {
  if (!/^\d{1,5}$/.test(text)) return null
  const n = Number(text)
  return n >= 1 && n <= 65535 ? n : null
}

/** Parses one rule; a string is the reason it is invalid. */
export function parseRule (raw: string): Rule | string {
  const text = raw.trim()
  if (text === '' || text.length > 300) return 'empty or longer than 300 characters'
  const split = splitPort(text)
  if (typeof split === 'string') return split
  const { host, port } = split
  if (/^[\d.]+(\/\d+)?$/.test(host) || host.includes(':')) {
    const cidr = parseCidr(host)
    return cidr === null ? 'not a valid address or CIDR block' : { kind: 'cidr', cidr, port, text }
  }
  if (host.startsWith('*.') || host.startsWith('.')) {
    const suffix = normalizeName(host.slice(host.startsWith('*.') ? 2 : 1))
    if (suffix === null) return 'not a valid domain'
    return { kind: 'suffix', suffix, includeApex: host.startsWith('.'), port, text }
  }
  if (host.includes('*')) return "wildcards only as a leading '*.'"
  const name = normalizeName(host)
  return name === null ? 'not a valid domain' : { kind: 'name', name, port, text }
}

/** Parses a list (comma, whitespace or newline separated). Throws a TypeError naming every bad entry. */
export function parseRules (input: string | readonly string[]): Rule[] {
  const items = typeof input === 'string' ? input.split(/[\s,]+/) : input
  const rules: Rule[] = []
  const bad: string[] = []
  for (const item of items) {
    if (item.trim() === '') continue
    const rule = parseRule(item)
    if (typeof rule === 'string') bad.push(`'${item.trim().slice(0, 80)}': ${rule}`)
    else rules.push(rule)
  }
  if (bad.length > 0) throw new TypeError(`invalid egress rule ${bad.join('; ')}`)
  if (rules.length > MAX_RULES) throw new TypeError(`at most ${MAX_RULES} egress rules`)
  return rules
}

const portOk = (rule: Rule, port: number): boolean => rule.port === null || rule.port === port

/** The first name rule (exact or wildcard) matching a normalized host name and port. */
export function matchName (rules: readonly Rule[], name: string, port: number): Rule | undefined {
  return rules.find(rule => {
    if (!portOk(rule, port)) return false
    if (rule.kind === 'name') return rule.name === name
    if (rule.kind === 'suffix') return name.endsWith(`.${rule.suffix}`) || (rule.includeApex && name === rule.suffix)
    return false
  })
}

/** The first address rule (IP or CIDR) containing the address, for the port. */
export function matchAddress (rules: readonly Rule[], ip: Ip, port: number): Rule | undefined {
  return rules.find(rule => rule.kind === 'cidr' && portOk(rule, port) && inCidr(ip, rule.cidr))
}
