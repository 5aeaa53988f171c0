import { validEmail } from '../../core/identity.js'
import { MODES, type EgressMode } from './policy.js'
import { parseRules, type Rule } from './rules.js'

/*
 * The three layers of a chat's egress policy, as pure functions:
 *   server   EGRESS + EGRESS_ALLOW
 *   user     the operator's default for the chat's user (EGRESS_USERS: by email, else by @domain)
 *   chat     the chat's override (PUT /api/egress/:chat)
 * The mode of the most specific layer that sets one wins (chat > user > server); allow rules add up
 * (server rules, then the user's, then the chat's), so a layer can widen or, through its mode, narrow.
 */

/** One layer above the server's setting: a mode (null: the layer below decides) and rules it adds. */
export interface Layer { mode: EgressMode | null, allow: string[] }

/** A layer with its rules parsed once. */
export interface ParsedLayer { layer: Layer, rules: Rule[] }

export type ModeSource = 'chat' | 'user' | 'server'

export interface Layered {
  mode: EgressMode
  /** which layer set the mode */
  source: ModeSource
  rules: Rule[]
}

export function combine (server: { mode: EgressMode, rules: Rule[] }, user: ParsedLayer | null, chat: ParsedLayer | null): Layered {
  const rules = [...server.rules, ...(user?.rules ?? []), ...(chat?.rules ?? [])]
  if (chat?.layer.mode != null) return { mode: chat.layer.mode, source: 'chat', rules }
  if (user?.layer.mode != null) return { mode: user.layer.mode, source: 'user', rules }
  return { mode: server.mode, source: 'server', rules }
}

/** Validates a layer from untrusted JSON (a file, a request): throws TypeError naming the problem. */
export function parseLayer (raw: unknown, where: string): ParsedLayer {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new TypeError(`${where}: expected an object with "mode" and/or "allow"`)
  const o = raw as Record<string, unknown>
  for (const key of Object.keys(o)) if (key !== 'mode' && key !== 'allow') throw new TypeError(`${where}: unknown field "${key.slice(0, 40)}"`)
  const mode = o.mode ?? null
  if (mode !== null && !MODES.includes(mode as EgressMode)) throw new TypeError(`${where}: "mode" must be open, allowlist, off or null`)
  const allow = o.allow ?? []
  if (!Array.isArray(allow) || !allow.every((r): r is string => typeof r === 'string' && r.length <= 300)) {
    throw new TypeError(`${where}: "allow" must be a list of rule strings (each at most 300 characters)`)
  }
  let rules: Rule[]
  try { rules = parseRules(allow) } catch (err) { throw new TypeError(`${where}: ${(err as Error).message}`) }
  return { layer: { mode: mode as EgressMode | null, allow: rules.map(r => r.text) }, rules }
}

/** The operator's per-user defaults: exact emails and `@domain` entries (lower case). */
export interface UserDefaults {
  byEmail: ReadonlyMap<string, ParsedLayer>
  byDomain: ReadonlyMap<string, ParsedLayer>
}

export const NO_USER_DEFAULTS: UserDefaults = { byEmail: new Map(), byDomain: new Map() }
export const MAX_USER_ENTRIES = 10_000

/**
 * Parses EGRESS_USERS: `{ "alice@example.com": { "mode": "allowlist", "allow": ["pypi.org"] },
 * "@example.com": { "mode": "open" } }`. Keys are case-insensitive. Throws TypeError naming every
 * problem's entry (at most the first 5).
 */
export function parseUserDefaults (json: unknown): UserDefaults {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new TypeError('expected a JSON object mapping emails or @domains to { mode, allow }')
  const entries = Object.entries(json as Record<string, unknown>)
  if (entries.length > MAX_USER_ENTRIES) throw new TypeError(`at most ${MAX_USER_ENTRIES} entries`)
  const byEmail = new Map<string, ParsedLayer>()
  const byDomain = new Map<string, ParsedLayer>()
  const problems: string[] = []
  for (const [rawKey, value] of entries) {
    const key = rawKey.trim().toLowerCase()
    const shown = `"${rawKey.slice(0, 80)}"`
    try {
      const layer = parseLayer(value, shown)
      if (key.startsWith('@') && key.length > 1 && !key.slice(1).includes('@')) byDomain.set(key.slice(1), layer)
      else if (validEmail(key) !== undefined) byEmail.set(key, layer)
      else throw new TypeError(`${shown}: not an email address or @domain`)
    } catch (err) { problems.push((err as Error).message) }
  }
  if (problems.length > 0) throw new TypeError(problems.slice(0, 5).join('; ') + (problems.length > 5 ? ` (and ${problems.length - 5} more)` : ''))
  return { byEmail, byDomain }
}

/** The default of a user: the exact email first, else its domain; null for no email or no entry. */
export function userDefault (defaults: UserDefaults, email: string | undefined): ParsedLayer | null {
  if (email === undefined) return null
  const lower = email.toLowerCase()
  const exact = defaults.byEmail.get(lower)
  if (exact !== undefined) return exact
  return defaults.byDomain.get(lower.slice(lower.lastIndexOf('@') + 1)) ?? null
}
