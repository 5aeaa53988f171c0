import type { RequestUser } from '../../core/identity.js'
import type { StateFiles } from '../chat-storage/types.js'

/*
 * The server's record of a chat's sandbox, `sandbox.json` among the chat's state files (chat-storage
 * `chatState`): which chat it is and which home volume it uses, written before the sandbox is created or
 * claimed from the warm pool (lifecycle.ts, pool-claim.ts) and read back at boot and on every pass
 * (sandbox-identity.ts). It is the chat's identity where labels carry none (an engine that cannot relabel a
 * claimed sandbox). It lives beside the chat's areas, in no sandbox mount, and holds no secrets.
 */

/** A pool slot id: 32 random hex digits (12 for slots made by earlier versions). */
export const SLOT = /^[0-9a-f]{12}(?:[0-9a-f]{20})?$/

/** Every sandbox's record: its chat and home volume. */
export interface SandboxRecord {
  chat_id: string
  home_volume: string
}

/** The record of a chat that claimed a warm-pool sandbox. */
export interface BindingRecord extends SandboxRecord {
  slot: string
  /** the engine id of the sandbox claimed (the one without the chat's environment), '' when unknown */
  sandbox_id: string
  claimed_at: string
  user_name: string | null
  user_email: string | null
  gitlab_host: string | null
}
/** A chat whose home volume came from the pool (Entry.pool; null: none; undefined: record not read yet). */
export interface PoolBinding {
  slot: string
  volume: string
  /** who claimed it (the git identity and GitLab host a fresh container would have been created with) */
  user?: RequestUser
  record: BindingRecord
}

export const RECORD = 'sandbox.json'
/** The warm pool's claim journal among a slot's state files (pool-claim.ts). */
export const JOURNAL = 'claim.json'
/** Records and journals are a few hundred bytes: anything larger is not ours. */
const MAX_BYTES = 64 * 1024

/** A state file as an object; null when missing, unreadable, too large, not JSON or not an object. */
export async function readState (files: StateFiles, name: string): Promise<Record<string, unknown> | null> {
  try {
    const v = await files.readJson(name, MAX_BYTES)
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? v as Record<string, unknown> : null
  } catch { return null }
}

/**
 * Writes a record or journal atomically (chat-storage's state-file write), without an fsync: they are
 * written before every create and twice on a warm pool claim, where one costs ~5 ms (measured: 5.3 ms with,
 * 0.3 ms without); a record a power cut lost reads as none, as a missing one does.
 */
export async function writeState (files: StateFiles, name: string, value: unknown): Promise<void> {
  await files.writeJson(name, value, { maxBytes: MAX_BYTES, sync: false })
}

const str = (v: unknown): string | null => typeof v === 'string' ? v : null

/** Any sandbox's record (created or claimed), null when it is not one. */
export function asIdentity (r: Record<string, unknown> | null): SandboxRecord | null {
  if (r === null || typeof r.chat_id !== 'string' || typeof r.home_volume !== 'string') return null
  return { chat_id: r.chat_id, home_volume: r.home_volume }
}

/** The record of a claimed sandbox, null for any other. */
export function asBinding (r: Record<string, unknown> | null): BindingRecord | null {
  if (r === null || typeof r.chat_id !== 'string' || typeof r.slot !== 'string' || !SLOT.test(r.slot) || typeof r.home_volume !== 'string') return null
  return {
    chat_id: r.chat_id,
    slot: r.slot,
    home_volume: r.home_volume,
    sandbox_id: str(r.sandbox_id) ?? '',
    claimed_at: String(r.claimed_at ?? ''),
    user_name: str(r.user_name),
    user_email: str(r.user_email),
    gitlab_host: str(r.gitlab_host)
  }
}
