import { normalizeChatId } from '../../core/chat-id.js'
import type { SandboxSummary } from './engine-types.js'
import { asBinding, JOURNAL, readState, RECORD } from './pool-record.js'
import type { PoolSlot, PoolState } from './pool-slots.js'
import type { CoreBase } from './context.js'

/*
 * The warm pool's upkeep on every reaper pass and at boot (docs/contract.md#warm-pool): ready sandboxes that
 * stopped, vanished, drifted or grew too old are replaced; unclaimed ones this server does not know yet (a
 * restart) are re-adopted, or removed when stale; a claim interrupted before the engine's claim is rolled
 * back. Creating and refilling is pool.ts's; it hands this file the operations it shares.
 */

/** What upkeep uses of the pool (pool.ts). */
export interface PoolOps {
  slotOf: (c: SandboxSummary) => string | null
  claimable: (p: PoolSlot, imageId: string | null) => string | null
  /** removes an unclaimed sandbox with its volume and areas (never throws) */
  discard: (slot: string, idOrName: string) => Promise<void>
  discardSlot: (s: PoolSlot) => Promise<void>
  /** a ready slot with its agent opening */
  warm: (s: PoolSlot) => PoolSlot
  refill: () => void
}

export function createPoolUpkeep (base: Pick<CoreBase, 'engine' | 'log' | 'opts'>, state: PoolState, ops: PoolOps): { maintain: (unclaimed: SandboxSummary[]) => Promise<void> } {
  const { engine, log } = base
  const { slotOf, claimable, discard, discardSlot, warm, refill } = ops

  /**
   * A reaper pass (and boot): pool sandboxes that stopped, vanished, drifted (image, settings) or
   * reached their max age are removed; unknown unclaimed ones (re-adopted at boot) join the pool; then refill.
   */
  async function maintain (unclaimed: SandboxSummary[]): Promise<void> {
    const p = state
    const listed = new Map(unclaimed.map(c => [c.id, c]))
    const imageId = await engine.imageId(base.opts.image).catch(() => null)
    for (const slot of [...p.ready]) {
      const c = listed.get(slot.id)
      const why = c === undefined ? 'gone' : !c.running ? 'stopped' : claimable(slot, imageId)
      if (why === null) continue
      p.ready.splice(p.ready.indexOf(slot), 1)
      log.info({ slot: slot.slot, reason: why }, 'warm pool: replacing a sandbox')
      await discardSlot(slot)
    }
    const known = new Set(p.ready.map(s => s.id))
    for (const c of unclaimed) {
      const slot = slotOf(c)
      // Only the slot being created is left alone: a refill running beside the boot's pass (the pool is
      // released once every plugin is ready) must not keep the other slots from their re-adoption or rollback.
      if (slot === null || known.has(c.id) || p.claiming.has(c.id) || slot === p.creating) continue
      await rollbackJournal(slot)
      await readopt(p, slot, c, imageId)
    }
    refill()
  }

  /**
   * A claim journal left by a server that stopped before the engine's claim (pool-claim.ts writes the
   * journal, then the chat's record, then claims): the sandbox is still unclaimed and its dirs untouched,
   * so the claim is rolled back (the chat's record removed when it names this slot).
   */
  async function rollbackJournal (slot: string): Promise<void> {
    const { storage } = base.opts
    const journal = storage.slotState(slot)
    const written = await readState(journal, JOURNAL)
    if (written === null) return
    const chatId = written.chat_id
    if (typeof chatId === 'string' && normalizeChatId(chatId) === chatId) {
      const state = storage.chatState(chatId)
      if (asBinding(await readState(state, RECORD))?.slot === slot) await state.remove(RECORD)
    }
    await journal.remove(JOURNAL)
    log.warn({ slot }, 'warm pool: rolled back a claim interrupted before the engine claimed the sandbox')
  }

  async function readopt (p: PoolState, slot: string, c: SandboxSummary, imageId: string | null): Promise<void> {
    const details = c.running ? await engine.inspect(c.id).catch(() => null) : null
    const candidate = details === null ? null : { slot, id: c.id, details, uid: base.opts.uid, gid: base.opts.gid }
    if (candidate === null || claimable(candidate, imageId) !== null || p.ready.length >= base.opts.poolSize) {
      log.info({ slot }, 'warm pool: removing a stale unclaimed sandbox')
      await discard(slot, c.id)
      return
    }
    p.ready.push(warm(candidate))
    log.info({ slot }, 'warm pool: re-adopted an unclaimed sandbox')
  }

  return { maintain }
}
