import type { EgressMode } from './policy.js'

/** One connection of a sandbox through the egress proxy, as the per-chat log keeps it. */
export interface ConnectionRecord {
  /** RFC 3339, when the request arrived */
  time: string
  /** as the sandbox asked (name or address literal) */
  host: string
  port: number
  /** CONNECT (tunnel) or HTTP (one plain request) */
  method: string
  /** the address dialled or refused, when resolution got that far */
  address?: string
  /** allowed (then bytes count), denied by policy, or failed (DNS, upstream unreachable, caps) */
  decision: 'allowed' | 'denied' | 'failed'
  /** public | rule | name-rule | off | not-allowlisted | address-class | bad-host | dns | upstream */
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

/** A chat's override of the server's egress policy (null fields: the server's setting applies). */
export interface EgressOverride {
  mode: EgressMode | null
  /** rules added to EGRESS_ALLOW for this chat */
  allow: string[]
}

export interface EgressService {
  /** The policy a chat's next connection gets: mode and rules, with the override applied. */
  effective (chatId: string): { mode: EgressMode, allow: string[], override: EgressOverride | null }
  /** Sets (or with null clears) a chat's override; applies to the chat's next connection. Throws EGRESS_BAD_RULE. */
  setOverride (chatId: string, override: EgressOverride | null): void
  /** The chat's most recent connections, oldest first (bounded). */
  connections (chatId: string): ConnectionRecord[]
}

declare module 'fastify' {
  interface FastifyInstance { egress: EgressService }
}
