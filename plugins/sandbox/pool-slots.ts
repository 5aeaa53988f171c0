import type { SandboxDetails } from './engine-types.js'
import type { AgentState } from './agent-connection.js'
import type { Entry } from './chats.js'
import { SANDBOX_HOSTNAME } from './names.js'

/*
 * The warm pool's shapes (pool.ts creates and refills it, pool-upkeep.ts re-adopts and replaces its
 * sandboxes, pool-claim.ts hands one to a chat): a ready slot, the pool's state, a slot's names.
 */

/** Labels of earlier versions: a pool sandbox's slot, a recreated claimed sandbox's home volume. */
export const POOL_LABEL = 'cu.pool-slot'
export const HOME_LABEL = 'cu.home-volume'

export interface PoolSlot {
  slot: string
  id: string
  /** the engine's view at creation (claimability: configDrift against the current settings) */
  details: SandboxDetails
  uid: number
  gid: number
  /** its agent connection, opened as soon as it is ready so that a claim finds it open (handed to the chat) */
  agent?: AgentState
}

export interface PoolState {
  /** ready, unclaimed sandboxes (oldest first) */
  readonly ready: PoolSlot[]
  /** the slot of the create in flight (at most one), or null */
  creating: string | null
  filling: Promise<void> | null
  /** claimed containers still running with the pool's env: container id → chat (pool-claim.ts chatExecEnv) */
  readonly bound: Map<string, Entry>
  /** container ids being claimed right now (out of `ready`, still named pool-…) */
  readonly claiming: Set<string>
  /** no create before this time (set after a claim: the new chat's first command goes first) */
  quietUntil: number
  /** after a failed create: no new attempt before this time */
  retryAt: number
  retryMs: number
  /** holds on creates (holdPool: plugins still loading) */
  held: number
}

/** A slot's names; its volume has a chat's form (`{prefix}-home-{32 hex}`; `-home-pool-` for earlier 12-hex slots). */
export const poolNames = (prefix: string, slot: string): { container: string, volume: string, hostname: string } =>
  ({ container: `${prefix}-pool-${slot}`, volume: slot.length === 12 ? `${prefix}-home-pool-${slot}` : `${prefix}-home-${slot}`, hostname: SANDBOX_HOSTNAME })
