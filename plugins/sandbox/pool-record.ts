import { readFile } from 'node:fs/promises'
import type { RequestUser } from '../../core/identity.js'

/*
 * The server's record of a chat's sandbox, `{DATA_DIR}/chats/{K}/sandbox.json`: which chat it is and
 * which home volume it uses, written before the sandbox is created or claimed from the warm pool
 * (lifecycle.ts, pool-claim.ts) and read back at boot and on every pass (sandbox-identity.ts). It is
 * the chat's identity where labels carry none (an engine that cannot relabel a claimed sandbox). It
 * lives in the chat's data dir, which no sandbox mounts, and holds no secrets.
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

async function readJson (path: string): Promise<Record<string, unknown> | null> {
  try {
    const v = JSON.parse(await readFile(path, 'utf8')) as unknown
    return typeof v === 'object' && v !== null ? v as Record<string, unknown> : null
  } catch { return null }
}

const str = (v: unknown): string | null => typeof v === 'string' ? v : null

/** Any sandbox's record (created or claimed), null when missing or unreadable. */
export async function readIdentity (path: string): Promise<SandboxRecord | null> {
  const r = await readJson(path)
  if (r === null || typeof r.chat_id !== 'string' || typeof r.home_volume !== 'string') return null
  return { chat_id: r.chat_id, home_volume: r.home_volume }
}

/** The record of a claimed sandbox, null for any other. */
export async function readRecord (path: string): Promise<BindingRecord | null> {
  const r = await readJson(path)
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
