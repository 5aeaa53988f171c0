import { chatKey, normalizeChatId } from '../../core/chat-id.js'
import type { SandboxSummary } from './engine-types.js'
import { LEASE_ROLE, sandboxNames } from './names.js'
import { bindEntry, ownVolume } from './pool-claim.js'
import { HOME_LABEL, POOL_LABEL, poolNames, type Pool } from './pool.js'
import { asBinding, asIdentity, readState, RECORD, type BindingRecord } from './pool-record.js'
import type { Entry } from './chats.js'
import type { CoreBase } from './context.js'

/*
 * Which chat a listed sandbox belongs to (re-adoption at boot and every reaper pass). A chat's sandbox
 * is named `{prefix}-sbx-{K}` and its chat is its record's (`{DATA_DIR}/chats/{K}/sandbox.json`, whose
 * chat id must hash to K), whether it was created or claimed from the warm pool: labels name the chat
 * only on engines that can label a claimed sandbox (then `cu.chat-key` must agree). Sandboxes made by
 * earlier versions carry `cu.chat-id` and are read from their labels. Unclaimed pool sandboxes
 * (`{prefix}-pool-{slot}`) go to the pool.
 */

interface Known { chatId: string, key: string, claimed: BindingRecord | null }

/** The sandbox is the very one claimed from the pool (so it lacks the chat's environment). */
function isClaimed (c: SandboxSummary, r: BindingRecord): boolean {
  return r.sandbox_id === '' ? c.labels[POOL_LABEL] !== undefined : r.sandbox_id === c.id
}

/** Which chat each listed sandbox belongs to. */
export interface Identity {
  sortListing: (list: SandboxSummary[]) => Promise<{ chats: SandboxSummary[], unclaimed: SandboxSummary[] }>
  bindListed: (entry: Entry, c: SandboxSummary) => void
  /** Logs a listed sandbox that is not a consistent one of ours, once per sandbox (it is left untouched). */
  ignore: (c: SandboxSummary, reason: string, message: string) => void
}

export function createIdentity (base: Pick<CoreBase, 'log' | 'opts'>, pool: Pick<Pool, 'state' | 'slotOf'>): Identity {
  const { log } = base
  /** sandbox id → its chat, read once per sandbox */
  const known = new Map<string, Known>()
  /** sandboxes already reported as not adoptable */
  const ignored = new Set<string>()

  function ignore (c: SandboxSummary, reason: string, message: string): void {
    if (ignored.has(c.id)) return
    ignored.add(c.id)
    log.warn({ container: c.name, reason }, message)
  }

  /**
   * Sorts a listing: unclaimed pool sandboxes for the pool; chat sandboxes with the labels register()
   * reads (`cu.chat-id`, `cu.chat-key`, taken from the record), claims interrupted by a restart finished.
   */
  async function sortListing (list: SandboxSummary[]): Promise<{ chats: SandboxSummary[], unclaimed: SandboxSummary[] }> {
    const chats: SandboxSummary[] = []
    const unclaimed: SandboxSummary[] = []
    const ids = new Set(list.map(c => c.id))
    const bound = pool.state.bound
    for (const id of [...bound.keys(), ...known.keys()]) if (!ids.has(id)) { bound.delete(id); known.delete(id) }
    for (const c of list) {
      if (c.labels[LEASE_ROLE.label] === LEASE_ROLE.value) continue
      if (pool.slotOf(c) !== null) { unclaimed.push(c); continue }
      const view = await chatView(c)
      if (view !== null) chats.push(view)
    }
    return { chats, unclaimed }
  }

  async function chatView (c: SandboxSummary): Promise<SandboxSummary | null> {
    const key = c.name.startsWith(`${base.opts.prefix}-sbx-`) ? /-sbx-([0-9a-f]{32})$/.exec(c.name)?.[1] : undefined
    // Not named like a chat's sandbox, or labelled by an earlier version: register() judges the labels.
    if (key === undefined || (c.labels['cu.chat-id'] !== undefined && c.labels[POOL_LABEL] === undefined)) return c
    let k = known.get(c.id)
    if (k === undefined) {
      const state = await readState(base.opts.storage.chatStateOfKey(key), RECORD)
      const [record, claimed] = [asIdentity(state), asBinding(state)]
      const why = record === null
        ? 'no record of its chat'
        : normalizeChatId(record.chat_id) !== record.chat_id || chatKey(record.chat_id) !== key || sandboxNames(base.opts.prefix, record.chat_id).container !== c.name
          ? 'its record names another chat'
          : (c.labels['cu.chat-key'] ?? key) !== key
              ? 'cu.chat-key does not match its name'
              : claimed !== null ? (ownVolume(base.opts.prefix, claimed) ? null : 'its record names a volume of another pool slot') : null
      if (why !== null || record === null) {
        ignore(c, why ?? 'no record of its chat', 'ignoring a sandbox whose chat is not known (left untouched)')
        return null
      }
      if (claimed !== null && await base.opts.storage.hasSlot(claimed.slot)) {
        await base.opts.storage.adoptSlot(claimed.slot, record.chat_id)
        log.warn({ chat: key, slot: claimed.slot }, 'warm pool: finished a claim interrupted after the engine claimed the sandbox')
      }
      k = { chatId: record.chat_id, key, claimed }
      known.set(c.id, k)
    }
    return { ...c, labels: { ...c.labels, 'cu.chat-id': k.chatId, 'cu.chat-key': key } }
  }

  /** register() made an entry for a listed sandbox: a claimed home volume is bound, a claimed sandbox gets its chat's env per exec. */
  function bindListed (entry: Entry, c: SandboxSummary): void {
    const claimed = known.get(c.id)?.claimed ?? legacyRecord(entry, c)
    if (claimed === null) return
    if (entry.pool?.volume !== claimed.home_volume) bindEntry(entry, { slot: claimed.slot, volume: claimed.home_volume, record: claimed })
    if (isClaimed(c, claimed)) pool.state.bound.set(c.id, entry)
  }

  /** A sandbox an earlier version recreated for a claimed home names the volume in a label. */
  function legacyRecord (entry: Entry, c: SandboxSummary): BindingRecord | null {
    const volume = c.labels[HOME_LABEL]
    const slot = volume === undefined ? undefined : /-home-pool-([0-9a-f]{12})$/.exec(volume)?.[1]
    if (slot === undefined || poolNames(base.opts.prefix, slot).volume !== volume) return null
    return entry.pool?.record ?? { chat_id: entry.names.chatId, slot, home_volume: volume, sandbox_id: '', claimed_at: '', user_name: null, user_email: null, gitlab_host: null }
  }

  return { sortListing, bindListed, ignore }
}
