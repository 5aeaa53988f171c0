import { readFile } from 'node:fs/promises'

/*
 * The record that binds a chat to the warm-pool sandbox it claimed (pool-claim.ts writes it, pool.ts and
 * pool-claim.ts read it back at boot and on every pass). It lives in the chat's data dir, which no
 * sandbox mounts, and holds no secrets.
 */

/** A pool slot id: 12 random hex digits. */
export const SLOT = /^[0-9a-f]{12}$/

/** The chat's binding to a claimed pool sandbox, `{DATA_DIR}/chats/{K}/sandbox.json` (no secrets). */
export interface BindingRecord {
  chat_id: string
  slot: string
  home_volume: string
  claimed_at: string
  user_name: string | null
  user_email: string | null
  gitlab_host: string | null
}
export const RECORD = 'sandbox.json'

export async function readRecord (path: string): Promise<BindingRecord | null> {
  try {
    const r = JSON.parse(await readFile(path, 'utf8')) as Partial<BindingRecord>
    if (typeof r.chat_id !== 'string' || typeof r.slot !== 'string' || !SLOT.test(r.slot) || typeof r.home_volume !== 'string') return null
    return { chat_id: r.chat_id, slot: r.slot, home_volume: r.home_volume, claimed_at: String(r.claimed_at ?? ''), user_name: r.user_name ?? null, user_email: r.user_email ?? null, gitlab_host: r.gitlab_host ?? null }
  } catch { return null }
}
