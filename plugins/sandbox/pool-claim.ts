import type { RequestUser } from '../../core/identity.js'
import type { ExtraStorage } from './engine-types.js'
import type { ExecSpec, SandboxEngine } from './engine-types.js'
import { chatEnv, toEnvList } from './env.js'
import { chatLabels, ownerFilter, rfc3339 } from './names.js'
import { poolNames, type Pool, type PoolSlot } from './pool.js'
import { asBinding, asIdentity, JOURNAL, readState, RECORD, writeState, type BindingRecord, type PoolBinding, type SandboxRecord } from './pool-record.js'
import type { Entry } from './chats.js'
import type { CoreBase, ServiceOptions } from './context.js'
import { giveAgent } from './agent-client.js'

/*
 * Claiming a warm sandbox for a new chat (docs/contract.md#warm-pool; design in plugins/sandbox/README.md, "Warm pool"). Under the
 * chat's lock: take a ready slot (synchronous, so never twice), write the journal and the chat's record,
 * claim the sandbox through the engine (named `{prefix}-sbx-{K}`, labelled where the engine can; a
 * conflict means the name is taken: the slot goes back and the create path adopts the other sandbox),
 * then give the slot's data areas to the chat (chat-storage adoptSlot). The chat keeps the slot's home volume for good
 * (Entry.pool, the record); the per-chat environment a sandbox gets at create is given to every exec of
 * a claimed sandbox instead.
 */

/** After a claim, the refill waits this long (the chat's hooks and first command run meanwhile). */
const QUIET_MS = 2000

export type Claimed = { container: { id: string, labels: Record<string, string>, running: boolean }, ids: { uid: number, gid: number } | null }

export function bindEntry (entry: Entry, b: PoolBinding | null): void {
  entry.pool = b
  if (b !== null) entry.names.volume = b.volume
}

/** A record names only the volume of its own slot under our prefix. */
export const ownVolume = (prefix: string, r: BindingRecord): boolean => r.home_volume === poolNames(prefix, r.slot).volume

type Where = Pick<ServiceOptions, 'storage' | 'prefix'>

/** Before a chat's sandbox is created: its record (chat id, home volume), unless it has one (a claimed home). */
export async function recordCreated (where: Where, entry: Entry): Promise<void> {
  if (entry.pool != null) return
  const record: SandboxRecord = { chat_id: entry.names.chatId, home_volume: entry.names.volume }
  await writeState(where.storage.chatState(entry.names.chatId), RECORD, record)
}

/** Reads the chat's pool record once: from then on its home volume is the claimed one (create, drift, removal, purge). */
export async function loadBinding (where: Where, entry: Entry): Promise<void> {
  if (entry.pool !== undefined) return
  const r = asBinding(await readState(where.storage.chatState(entry.names.chatId), RECORD))
  bindEntry(entry, r !== null && r.chat_id === entry.names.chatId && ownVolume(where.prefix, r) ? { slot: r.slot, volume: r.home_volume, record: r } : null)
}

/** The adapter with the chat env in front of each exec's own (later entries win, as over a container's env). */
export function withChatEnv (docker: SandboxEngine, envOf: (sandboxId: string) => string[] | undefined): SandboxEngine {
  return {
    ...docker,
    exec: async (sandboxId: string, spec: ExecSpec) => {
      const extra = envOf(sandboxId)
      return await docker.exec(sandboxId, extra === undefined ? spec : { ...spec, env: [...extra, ...(spec.env ?? [])] })
    }
  }
}

/** Claiming a pool sandbox for a new chat, and the chat env of every exec into a claimed one. */
export interface PoolClaim {
  claim: (entry: Entry, user: RequestUser | undefined, extra: ExtraStorage[]) => Promise<Claimed | null>
  chatExecEnv: (sandboxId: string) => string[] | undefined
}

export function createPoolClaim (base: Pick<CoreBase, 'engine' | 'log' | 'opts' | 'clock'>, pool: Pool): PoolClaim {
  const { engine, log, clock } = base

  /** The environment a fresh container of this chat carries and a claimed one lacks: given to each of its execs. */
  function chatExecEnv (sandboxId: string): string[] | undefined {
    const entry = pool.state.bound.get(sandboxId)
    const b = entry?.pool
    if (entry === undefined || b === undefined || b === null) return undefined
    const r = b.record
    const user: RequestUser = b.user ?? {
      emailRejected: false,
      mcpServers: [],
      ...(r.user_name !== null && { name: r.user_name }),
      ...(r.user_email !== null && { email: r.user_email }),
      credentials: { ...(r.gitlab_host !== null && { gitlabHost: r.gitlab_host }), ...(entry.user?.credentials.gitlabToken !== undefined && { gitlabToken: entry.user.credentials.gitlabToken }) }
    }
    return toEnvList(chatEnv(entry.names.chatId, user))
  }

  /**
   * A new chat (no pool record, no home volume of its own) with no extra mounts takes a ready pool
   * sandbox that still matches the settings; null: create one as usual.
   */
  async function claim (entry: Entry, user: RequestUser | undefined, extra: ExtraStorage[]): Promise<Claimed | null> {
    if (base.opts.poolSize <= 0) return null
    await loadBinding(base.opts, entry)
    // Per-user mounts are fixed at create: such chats get a fresh sandbox. A chat claimed before keeps its volume.
    if (extra.length > 0 || entry.pool !== null || pool.state.ready.length === 0) { pool.refill(); return null }
    // A chat that had a sandbox has a record (or, made by an earlier version, a volume labelled with its key).
    const [record, own, imageId] = await Promise.all([
      readState(base.opts.storage.chatState(entry.names.chatId), RECORD).then(asIdentity),
      engine.listVolumes([...ownerFilter(base.opts.prefix), `cu.chat-key=${entry.names.key}`]),
      engine.imageId(base.opts.image).catch(() => null)
    ])
    if (record !== null || own.length > 0) return null
    let slot: PoolSlot | undefined
    while ((slot = pool.takeSlot()) !== undefined) {
      const why = pool.claimable(slot, imageId)
      if (why === null) break
      log.info({ slot: slot.slot, reason: why }, 'warm pool: replacing a sandbox that no longer matches')
      void pool.discardSlot(slot)
    }
    if (slot === undefined) { pool.refill(); return null }
    const state = pool.state
    state.claiming.add(slot.id)
    try {
      return await bind(entry, slot, user)
    } finally {
      state.claiming.delete(slot.id)
      // The new chat's hooks and first command go first: the refill waits a moment.
      state.quietUntil = clock.real() + QUIET_MS
      pool.refill()
    }
  }

  async function bind (entry: Entry, slot: PoolSlot, user: RequestUser | undefined): Promise<Claimed | null> {
    const { storage } = base.opts
    const chatState = storage.chatState(entry.names.chatId)
    const slotState = storage.slotState(slot.slot)
    const record: BindingRecord = {
      chat_id: entry.names.chatId,
      slot: slot.slot,
      home_volume: poolNames(base.opts.prefix, slot.slot).volume,
      sandbox_id: slot.id,
      claimed_at: rfc3339(new Date(clock.now())),
      user_name: user?.name ?? null,
      user_email: user?.email ?? null,
      gitlab_host: user?.credentials.gitlabHost ?? null
    }
    // Journal first (a restart before the claim rolls back), then the chat's record (a restart after it finishes).
    await writeState(slotState, JOURNAL, { chat_id: entry.names.chatId })
    await writeState(chatState, RECORD, record)
    const labels = chatLabels(engine.labelsAtClaim, entry.names.chatId)
    const renamed = await engine.claim(slot.id, { name: entry.names.container, labels }).catch(err => err as Error)
    if (renamed !== true) {
      await chatState.remove(RECORD).catch(() => {})
      await slotState.remove(JOURNAL).catch(() => {})
      if (renamed === 'conflict') pool.state.ready.unshift(slot)
      else void pool.discardSlot(slot)
      log.info({ chat: entry.names.key, slot: slot.slot, ...(renamed instanceof Error ? { err: renamed } : { result: String(renamed) }) }, 'warm pool: claim not possible; creating instead')
      if (renamed instanceof Error) throw renamed
      return null
    }
    bindEntry(entry, { slot: slot.slot, volume: record.home_volume, record, ...(user !== undefined && { user }) })
    // Its agent, opened while it waited, now serves the chat (requests carry the chat's env: agent-exec.ts).
    if (slot.agent !== undefined) giveAgent(entry, slot.agent)
    pool.state.bound.set(slot.id, entry)
    await storage.adoptSlot(slot.slot, entry.names.chatId)
    log.info({ chat: entry.names.key, slot: slot.slot, container: entry.names.container }, 'warm pool: sandbox claimed')
    return { container: { id: slot.id, labels: { ...slot.details.labels, ...labels }, running: true }, ids: slot.uid > 0 ? { uid: slot.uid, gid: slot.gid } : null }
  }

  return { chatExecEnv, claim }
}
