import type { EgressMode } from './policy.js'

/** One connection of a sandbox through the egress proxy, as the per-chat log keeps it. */
export interface ConnectionRecord {
  /** RFC 3339, when the request arrived */
  time: string
  /** as the sandbox asked (name or address literal) */
  host: string
  port: number
  /** CONNECT (tunnel), HTTP (one plain request) or SOCKS5 (a SOCKS5 CONNECT tunnel) */
  method: string
  /** the address dialled or refused, when resolution got that far */
  address?: string
  /** allowed (then bytes count), denied by policy, or failed (DNS, upstream unreachable, caps) */
  decision: 'allowed' | 'denied' | 'failed'
  /** public | rule | name-rule | off | not-allowlisted | address-class | bad-host | dns | upstream | socks (a SOCKS5 command other than CONNECT) */
  reason: string
  /** the allow rule that matched, as written */
  rule?: string
  /** the text the sandbox's client was shown */
  message?: string
  /** sandbox → upstream */
  bytesUp: number
  /** upstream → sandbox */
  bytesDown: number
  durationMs: number
}

/** A chat's override of the server's egress policy (null mode: the user's default or the server's setting applies). */
export interface EgressOverride {
  mode: EgressMode | null
  /** rules added to EGRESS_ALLOW (and the user's rules) for this chat */
  allow: string[]
}

/** The policy a chat's next connection gets, and where it comes from. */
export interface EffectivePolicy {
  mode: EgressMode
  /** the layer that set the mode: the chat's override, its user's default (EGRESS_USERS), or the server (EGRESS) */
  source: 'chat' | 'user' | 'server'
  /** every rule in force: EGRESS_ALLOW, then the user's, then the chat's */
  allow: string[]
  override: EgressOverride | null
  /** the operator's default for the chat's user, when one applies */
  user: { email: string, mode: EgressMode | null, allow: string[] } | null
}

export interface EgressService {
  /** The policy a chat's next connection gets (chat override > user default > server setting for the mode; rules add up). */
  effective (chatId: string): Promise<EffectivePolicy>
  /**
   * Sets (or with null clears) a chat's override and stores it under the chat's data directory, so it
   * survives a restart; applies to the chat's next connection. Rejects EGRESS_BAD_RULE, or the disk's error.
   */
  setOverride (chatId: string, override: EgressOverride | null): Promise<EffectivePolicy>
  /** The chat's most recent connections, oldest first (bounded). */
  connections (chatId: string): ConnectionRecord[]
}

declare module 'fastify' {
  interface FastifyInstance { egress: EgressService }
}
