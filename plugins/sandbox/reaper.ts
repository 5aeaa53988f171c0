import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { chatKey } from '../../core/chat-id.js'
import { dropAddress } from './addresses.js'
import { bootstrap, register } from './boot.js'
import { readMeta, removeChatDir } from './data-dirs.js'
import type { SandboxSummary } from './engine-types.js'
import { SANDBOX_CAPACITY } from './errors.js'
import { ownerFilter } from './names.js'
import { noteOutsideChange } from './recovery.js'
import { maintain, poolOf, yieldSlot } from './pool.js'
import { loadBinding } from './pool-claim.js'
import { sortListing } from './sandbox-identity.js'
import { changed, entryOf, notifyStop, stopEntry, tooOld, withLock, type Entry, type Registry } from './registry.js'

/*
 * Server-driven lifecycle (docs/contract.md#isolation, docs/contract.md#idle-stop-max-age-and-purge): the reaper pass (reconcile from one
 * labelled `docker ps`, idle stop, max-age removal), the hourly data purge and the
 * MAX_RUNNING_SANDBOXES cap.
 */

/** One reaper pass (every reaperIntervalMs): reconcile, idle stop, max-age removal. Single flight. */
export async function reap (reg: Registry): Promise<void> {
  if (reg.closed) return
  reg.reaping ??= reapOnce(reg).finally(() => { reg.reaping = null })
  await reg.reaping
}

async function reapOnce (reg: Registry): Promise<void> {
  if (!reg.bootstrapped) {
    try { await bootstrap(reg) } catch { return }
  }
  let list: SandboxSummary[]
  const mark = reg.epoch
  try {
    list = await reg.engine.list(ownerFilter(reg.opts.prefix))
    reg.engineUp = true
  } catch (err) {
    reg.engineUp = false
    reg.log.debug({ err }, 'reaper: the engine is unavailable')
    return
  }
  const { chats, unclaimed } = await sortListing(reg, list)
  const seen = reconcile(reg, chats, mark)
  const now = reg.opts.now()
  const jobs: Array<Promise<void>> = []
  for (const entry of seen) {
    if (entry.locked > 0 || entry.ensuring !== null || entry.stopping) continue
    if (tooOld(reg, entry.createdAt) && entry.callLeases === 0) {
      jobs.push(removeForAge(reg, entry))
      continue
    }
    if (entry.state === 'running' && entry.callLeases + entry.socketLeases === 0 && now - entry.lastActive >= reg.opts.idleTimeoutS * 1000) {
      jobs.push(stopEntry(reg, entry, 'idle').catch(err => { reg.log.warn({ chat: entry.names.key, err }, 'idle stop failed') }))
    }
  }
  await Promise.all(jobs)
  await maintain(reg, unclaimed).catch(err => { reg.log.warn({ err }, 'warm pool: maintenance failed') })
  // Forget chats that have nothing left to track.
  for (const [key, entry] of reg.entries) {
    if (entry.state === 'absent' && entry.locked === 0 && entry.ensuring === null && entry.callLeases + entry.socketLeases === 0 &&
      now - entry.lastActive > reg.opts.idleTimeoutS * 1000) reg.entries.delete(key)
  }
}

/** Registers what Docker lists; untouched entries (epoch ≤ mark) no longer listed become absent. */
function reconcile (reg: Registry, list: SandboxSummary[], mark: number): Set<Entry> {
  const seen = new Set<Entry>()
  for (const c of list) {
    const entry = register(reg, c, reg.opts.now(), mark)
    if (entry !== null) seen.add(entry)
  }
  for (const entry of reg.entries.values()) {
    if (!seen.has(entry) && entry.locked === 0 && entry.ensuring === null && entry.epoch <= mark && (entry.state === 'running' || entry.state === 'stopped')) {
      if (entry.state === 'running') noteOutsideChange(entry, true)
      dropAddress(reg, entry)
      entry.state = 'absent'
      entry.sandboxId = undefined
      changed(reg, entry)
    }
  }
  return seen
}

async function removeForAge (reg: Registry, entry: Entry): Promise<void> {
  try {
    await withLock(entry, async () => {
      if (entry.callLeases > 0) return
      await reg.engine.remove(entry.sandboxId ?? entry.names.container)
      entry.state = 'absent'
      entry.sandboxId = undefined
      entry.recoverable = false
      changed(reg, entry)
      reg.log.info({ chat: entry.names.key, maxAgeHours: reg.opts.maxAgeHours }, 'sandbox reached its maximum age: removed (volume and data kept)')
    })
    notifyStop(reg, entry, 'max-age')
  } catch (err) {
    reg.log.warn({ chat: entry.names.key, err }, 'max-age removal failed')
  }
}

/** One purge pass (hourly): chats with no container and no activity for DATA_MAX_AGE_DAYS lose volume and data. */
export async function purge (reg: Registry): Promise<number> {
  if (reg.closed || reg.opts.dataMaxAgeDays <= 0) return 0
  const cutoff = reg.opts.now() - reg.opts.dataMaxAgeDays * 86_400_000
  let keys: string[]
  try {
    keys = (await readdir(join(reg.opts.dataDir, 'chats'))).filter(k => /^[0-9a-f]{32}$/.test(k))
  } catch { return 0 }
  let purged = 0
  for (const key of keys) {
    if (await purgeChat(reg, key, cutoff)) purged++
  }
  return purged
}

async function purgeChat (reg: Registry, key: string, cutoff: number): Promise<boolean> {
  const meta = await readMeta(join(reg.opts.dataDir, 'chats', key, 'meta.json'))
  if (meta === null || chatKey(meta.chat_id) !== key) return false
  const last = Date.parse(meta.last_active_at)
  if (!Number.isFinite(last) || last > cutoff) return false
  const known = reg.entries.get(key)
  if (known !== undefined && (known.callLeases + known.socketLeases > 0 || known.ensuring !== null || known.locked > 0 || known.lastActive > cutoff)) return false
  const entry = entryOf(reg, meta.chat_id)
  let purged = false
  try {
    await withLock(entry, async () => {
      if (await reg.engine.inspect(entry.names.container) !== null) return
      await loadBinding(reg, entry)
      await reg.engine.removeVolume(entry.names.volume)
      await removeChatDir(reg.opts.dataDir, key)
      entry.state = 'absent'
      entry.meta = undefined
      entry.metaLoaded = false
      changed(reg, entry)
      purged = true
      reg.log.info({ chat: key, lastActive: meta.last_active_at }, 'purged an inactive chat (volume and data deleted)')
    })
  } catch (err) {
    reg.log.warn({ chat: key, err }, 'purge failed')
  }
  return purged
}

function runningCount (reg: Registry, except: Entry): number {
  let n = 0
  for (const e of reg.entries.values()) if (e !== except && e.state === 'running') n++
  for (const e of reg.starting) if (e !== except && e.state !== 'running') n++
  return n
}

/** MAX_RUNNING_SANDBOXES: stop the least recently active idle sandbox, or fail with SANDBOX_CAPACITY. */
export async function reserveSlot (reg: Registry, entry: Entry): Promise<void> {
  if (reg.opts.maxRunning === 0) { reg.starting.add(entry); return }
  // Ready pool sandboxes count too, and give way before any chat's sandbox is stopped.
  while (runningCount(reg, entry) + poolOf(reg).ready.length >= reg.opts.maxRunning) {
    if (await yieldSlot(reg)) continue
    let victim: Entry | undefined
    for (const e of reg.entries.values()) {
      if (e === entry || e.state !== 'running' || e.stopping || e.locked > 0 || e.callLeases + e.socketLeases > 0) continue
      if (victim === undefined || e.lastActive < victim.lastActive) victim = e
    }
    if (victim === undefined) throw new SANDBOX_CAPACITY()
    reg.log.info({ chat: victim.names.key }, 'sandbox capacity reached: stopping the least recently active idle sandbox')
    await stopEntry(reg, victim, 'capacity')
  }
  reg.starting.add(entry)
}
