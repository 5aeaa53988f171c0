import { freemem, totalmem } from 'node:os'
import { chatKey } from '../../core/chat-id.js'
import type { Addresses } from './addresses.js'
import type { Boot } from './boot.js'
import { withLock, type Chats, type Entry } from './chats.js'
import { tooOld, type CoreBase } from './context.js'
import type { SandboxSummary } from './engine-types.js'
import { SANDBOX_CAPACITY } from './errors.js'
import { ownerFilter } from './names.js'
import type { Pool } from './pool.js'
import { loadBinding } from './pool-claim.js'
import type { Recovery } from './recovery.js'
import type { Identity } from './sandbox-identity.js'
import type { Transitions } from './transitions.js'

/*
 * Server-driven lifecycle (docs/contract.md#isolation, docs/contract.md#idle-stop-max-age-and-purge): the reaper pass (reconcile from one
 * labelled `docker ps`, idle pause, then stop, max-age removal), the hourly data purge and the
 * MAX_RUNNING_SANDBOXES cap.
 */

/** Below this share of the machine's memory available, paused sandboxes are stopped before CONTAINER_PAUSED_TIMEOUT. */
export const PAUSED_MEMORY_FLOOR = 0.1
const PAUSED_STOPS_PER_PASS = 4
const systemMemoryAvailable = (): number => freemem() / totalmem()

/** What the reaper builds on. */
export interface ReaperDeps {
  boot: Pick<Boot, 'bootstrap' | 'register'>
  pool: Pick<Pool, 'state' | 'maintain' | 'yieldSlot'>
  identity: Pick<Identity, 'sortListing'>
  recovery: Pick<Recovery, 'noteOutsideChange'>
  addresses: Pick<Addresses, 'dropAddress'>
  transitions: Pick<Transitions, 'stopEntry' | 'pauseEntry' | 'notifyStop'>
}

/** Server-driven lifecycle: reaper passes, the data purge and the capacity cap. */
export interface Reaper {
  reap: () => Promise<void>
  purge: () => Promise<number>
  reserveSlot: (entry: Entry) => Promise<void>
}

export function createReaper (base: Pick<CoreBase, 'engine' | 'log' | 'opts' | 'clock' | 'status'>, chats: Chats, d: ReaperDeps): Reaper {
  const { engine, log, clock, status } = base
  const { boot, pool, identity, recovery, addresses, transitions } = d
  let reaping: Promise<void> | null = null

  /** One reaper pass (every reaperIntervalMs): reconcile, idle stop, max-age removal. Single flight. */
  async function reap (): Promise<void> {
    if (status.closed) return
    reaping ??= reapOnce().finally(() => { reaping = null })
    await reaping
  }

  async function reapOnce (): Promise<void> {
    if (!status.bootstrapped) {
      try { await boot.bootstrap() } catch { return }
    }
    let list: SandboxSummary[]
    const mark = chats.mark()
    try {
      list = await engine.list(ownerFilter(base.opts.prefix))
      status.engineUp = true
    } catch (err) {
      status.engineUp = false
      log.debug({ err }, 'reaper: the engine is unavailable')
      return
    }
    const { chats: listed, unclaimed } = await identity.sortListing(list)
    const seen = reconcile(listed, mark)
    const now = clock.now()
    const jobs: Array<Promise<void>> = []
    for (const entry of seen) {
      if (entry.locked > 0 || entry.ensuring !== null || entry.stopping) continue
      if (tooOld(base, entry.createdAt) && entry.callLeases === 0) {
        jobs.push(removeForAge(entry))
        continue
      }
      if (entry.callLeases + entry.socketLeases > 0) continue
      // Idle: paused first (memory kept, woken by the next access), stopped CONTAINER_PAUSED_TIMEOUT later.
      if (entry.state === 'running' && now - entry.lastActive >= base.opts.idleTimeoutS * 1000) {
        const job = base.opts.pausedTimeoutS > 0 ? transitions.pauseEntry(entry) : transitions.stopEntry(entry, 'idle')
        jobs.push(job.catch(err => { log.warn({ chat: entry.names.key, err }, 'idle pause or stop failed') }))
      } else if (entry.state === 'paused' && now - entry.pausedAt >= base.opts.pausedTimeoutS * 1000) {
        jobs.push(transitions.stopEntry(entry, 'idle').catch(err => { log.warn({ chat: entry.names.key, err }, 'stop of a paused sandbox failed') }))
      }
    }
    await Promise.all(jobs)
    await relieveMemory()
    await pool.maintain(unclaimed).catch(err => { log.warn({ err }, 'warm pool: maintenance failed') })
    // Forget chats that have nothing left to track.
    for (const [key, entry] of chats.entries) {
      if (entry.state === 'absent' && entry.locked === 0 && entry.ensuring === null && entry.callLeases + entry.socketLeases === 0 &&
        now - entry.lastActive > base.opts.idleTimeoutS * 1000) chats.entries.delete(key)
    }
  }

  /**
   * Memory pressure: while less than PAUSED_MEMORY_FLOOR of the machine's memory is available, paused
   * sandboxes (which keep their memory) are stopped, the longest paused first, at most
   * PAUSED_STOPS_PER_PASS a pass (a stop frees memory only once the engine has ended the processes).
   */
  async function relieveMemory (): Promise<void> {
    const available = base.opts.memoryAvailable ?? systemMemoryAvailable
    for (let i = 0; i < PAUSED_STOPS_PER_PASS && available() < PAUSED_MEMORY_FLOOR; i++) {
      let oldest: Entry | undefined
      for (const e of chats.entries.values()) {
        if (e.state !== 'paused' || e.stopping || e.locked > 0 || e.ensuring !== null || e.callLeases + e.socketLeases > 0) continue
        if (oldest === undefined || e.pausedAt < oldest.pausedAt) oldest = e
      }
      if (oldest === undefined) return
      log.warn({ chat: oldest.names.key, available: Math.round(available() * 100) / 100 }, 'memory is short: stopping a paused sandbox before its time')
      await transitions.stopEntry(oldest, 'memory').catch(err => { log.warn({ chat: oldest?.names.key, err }, 'stop of a paused sandbox failed') })
    }
  }

  /** Registers what Docker lists; untouched entries (epoch ≤ mark) no longer listed become absent. */
  function reconcile (list: SandboxSummary[], mark: number): Set<Entry> {
    const seen = new Set<Entry>()
    for (const c of list) {
      const entry = boot.register(c, clock.now(), mark)
      if (entry !== null) seen.add(entry)
    }
    for (const entry of chats.entries.values()) {
      if (!seen.has(entry) && entry.locked === 0 && entry.ensuring === null && entry.epoch <= mark && (entry.state === 'running' || entry.state === 'paused' || entry.state === 'stopped')) {
        if (entry.state === 'running' || entry.state === 'paused') recovery.noteOutsideChange(entry, true)
        addresses.dropAddress(entry)
        entry.state = 'absent'
        entry.sandboxId = undefined
        chats.changed(entry)
      }
    }
    return seen
  }

  async function removeForAge (entry: Entry): Promise<void> {
    try {
      await withLock(entry, async () => {
        if (entry.callLeases > 0) return
        await engine.remove(entry.sandboxId ?? entry.names.container)
        entry.state = 'absent'
        entry.sandboxId = undefined
        entry.recoverable = false
        chats.changed(entry)
        log.info({ chat: entry.names.key, maxAgeHours: base.opts.maxAgeHours }, 'sandbox reached its maximum age: removed (volume and data kept)')
      })
      transitions.notifyStop(entry, 'max-age')
    } catch (err) {
      log.warn({ chat: entry.names.key, err }, 'max-age removal failed')
    }
  }

  /** One purge pass (hourly): chats with no container and no activity for DATA_MAX_AGE_DAYS lose volume and data. */
  async function purge (): Promise<number> {
    if (status.closed || base.opts.dataMaxAgeDays <= 0) return 0
    const cutoff = clock.now() - base.opts.dataMaxAgeDays * 86_400_000
    let keys: string[]
    try {
      keys = await base.opts.storage.chatKeys()
    } catch { return 0 }
    let purged = 0
    for (const key of keys) {
      if (await purgeChat(key, cutoff)) purged++
    }
    return purged
  }

  async function purgeChat (key: string, cutoff: number): Promise<boolean> {
    const meta = await base.opts.storage.readMetaOfKey(key).catch(() => null)
    if (meta === null || chatKey(meta.chat_id) !== key) return false
    const last = Date.parse(meta.last_active_at)
    if (!Number.isFinite(last) || last > cutoff) return false
    const known = chats.entries.get(key)
    if (known !== undefined && (known.callLeases + known.socketLeases > 0 || known.ensuring !== null || known.locked > 0 || known.lastActive > cutoff)) return false
    const entry = chats.entryOf(meta.chat_id)
    let purged = false
    try {
      await withLock(entry, async () => {
        if (await engine.inspect(entry.names.container) !== null) return
        await loadBinding(base.opts, entry)
        await engine.removeVolume(entry.names.volume)
        await base.opts.storage.purgeKey(key)
        entry.state = 'absent'
        entry.meta = undefined
        entry.metaLoaded = false
        chats.changed(entry)
        purged = true
        log.info({ chat: key, lastActive: meta.last_active_at }, 'purged an inactive chat (volume and data deleted)')
      })
    } catch (err) {
      log.warn({ chat: key, err }, 'purge failed')
    }
    return purged
  }

  /** Running and paused sandboxes (a paused one keeps its memory), and those being started. */
  function runningCount (except: Entry): number {
    let n = 0
    for (const e of chats.entries.values()) if (e !== except && (e.state === 'running' || e.state === 'paused')) n++
    for (const e of chats.starting) if (e !== except && e.state !== 'running') n++
    return n
  }

  /**
   * MAX_RUNNING_SANDBOXES: stop the least recently active paused sandbox, else the least recently active
   * idle running one, or fail with SANDBOX_CAPACITY.
   */
  async function reserveSlot (entry: Entry): Promise<void> {
    if (base.opts.maxRunning === 0) { chats.starting.add(entry); return }
    // Ready pool sandboxes count too, and give way before any chat's sandbox is stopped.
    while (runningCount(entry) + pool.state.ready.length >= base.opts.maxRunning) {
      if (await pool.yieldSlot()) continue
      let victim: Entry | undefined
      for (const e of chats.entries.values()) {
        if (e === entry || (e.state !== 'running' && e.state !== 'paused') || e.stopping || e.locked > 0 || e.callLeases + e.socketLeases > 0) continue
        const better = victim === undefined ||
          (e.state === 'paused' && victim.state !== 'paused') ||
          (e.state === victim.state && e.lastActive < victim.lastActive)
        if (better) victim = e
      }
      if (victim === undefined) throw new SANDBOX_CAPACITY()
      log.info({ chat: victim.names.key }, 'sandbox capacity reached: stopping the least recently active idle sandbox')
      await transitions.stopEntry(victim, 'capacity')
    }
    chats.starting.add(entry)
  }

  return { reap, purge, reserveSlot }
}
