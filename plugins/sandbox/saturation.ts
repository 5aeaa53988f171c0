import type { ResourceStats } from './engine-types.js'
import { report } from './notices.js'
import type { Ensure, Entry } from './chats.js'
import { sleep } from './clock.js'
import type { CoreBase } from './context.js'
import type { Transitions } from './transitions.js'
import type { SandboxNotice } from './types.js'

/*
 * A saturated sandbox: its process limit is exhausted (a fork bomb's processes outlive the command
 * that started them, so no exec can start and every fork fails with EAGAIN) or its memory is (the
 * kernel OOM-kills whatever starts). Only the engine's numbers count (cgroup counters through the
 * stats endpoint, OOM events); what the sandbox prints or reports merely makes us ask. A saturated
 * sandbox is restarted: kill (every process ends at once), start the same container (home volume,
 * outputs and writable layer kept), run the ensure hooks, and tell the model what was lost.
 */

export interface Diagnosis {
  /** the process limit is (nearly) exhausted */
  pidsFull: boolean
  /** memory in use (without reclaimable cache) is at ≥ 95 % of the limit */
  memoryFull: boolean
  /** OOM kills the engine reported since the given instant */
  oomKills: number
  stats: ResourceStats | null
}

/** Near the limit: within 2 % (at least 2) of it, since exiting processes free slots for a moment. */
export function pidsNearLimit (current: number, limit: number): boolean {
  return limit > 0 && current >= limit - Math.max(2, Math.ceil(limit * 0.02))
}

/** How far a number the sandbox reports (a hint only) must go before the engine is asked. */
export function pidsSuspicious (reported: number | undefined, limit: number): boolean {
  return reported !== undefined && limit > 0 && reported >= limit * 0.9
}

/** Diagnosis from the engine's numbers and the restart of a saturated sandbox. */
export interface Saturation {
  diagnose: (entry: Entry, what: { stats?: boolean, oomSince?: number, confirm?: boolean }) => Promise<Diagnosis>
  pidsNotice: (d: Diagnosis, action: SandboxNotice['action']) => SandboxNotice
  memoryNotice: (d: Diagnosis | null, action: SandboxNotice['action']) => SandboxNotice
  restartSandbox: (entry: Entry, notice: SandboxNotice) => Promise<void>
}

export function createSaturation (base: Pick<CoreBase, 'engine' | 'log' | 'opts' | 'clock'>, transitions: Pick<Transitions, 'killKeepingFiles' | 'notifyStop'>, ensure: Ensure): Saturation {
  const { engine, log, opts, clock } = base

  /**
   * Asks the engine about the chat's sandbox: `stats` reads the pids and memory counters (≈1 s: the
   * stats endpoint waits for its next sample), `oomSince` counts OOM kills since that instant (ms),
   * `confirm` takes a second sample when the first says saturated. Failures count as "not saturated"
   * (logged at debug).
   */
  async function diagnose (entry: Entry, what: { stats?: boolean, oomSince?: number, confirm?: boolean }): Promise<Diagnosis> {
    const out: Diagnosis = { pidsFull: false, memoryFull: false, oomKills: 0, stats: null }
    const id = entry.sandboxId
    if (id === undefined) return out
    const jobs: Array<Promise<void>> = []
    if (what.stats === true) {
      jobs.push(engine.stats(id).then(stats => {
        out.stats = stats
        out.pidsFull = pidsNearLimit(stats.pids.current, stats.pids.limit)
        out.memoryFull = stats.memory.limit > 0 && stats.memory.usage >= stats.memory.limit * 0.95
      }, err => { log.debug({ chat: entry.names.key, err }, 'stats of the sandbox failed') }))
    }
    if (what.oomSince !== undefined) {
      // The engine stamps events with its own clock; a margin covers a small skew.
      jobs.push(engine.oomKills(id, what.oomSince - 2000, clock.real()).then(n => { out.oomKills = n },
        err => { log.debug({ chat: entry.names.key, err }, 'OOM events of the sandbox could not be read') }))
    }
    await Promise.all(jobs)
    if (what.confirm === true && (out.pidsFull || out.memoryFull)) {
      // A build may touch the limit for a moment; a runaway stays there. Saturated only if it still is.
      await sleep(500)
      const again = await diagnose(entry, { stats: true })
      out.pidsFull &&= again.pidsFull
      out.memoryFull &&= again.memoryFull
      out.stats = again.stats ?? out.stats
    }
    return out
  }

  function pidsNotice (d: Diagnosis, action: SandboxNotice['action']): SandboxNotice {
    return { kind: 'pids-limit', action, limit: d.stats?.pids.limit ?? opts.pidsLimit }
  }

  function memoryNotice (d: Diagnosis | null, action: SandboxNotice['action']): SandboxNotice {
    return { kind: 'out-of-memory', action, limit: d?.stats?.memory.limit ?? opts.memLimit }
  }

  /**
   * Restarts the chat's sandbox because of `notice` (saturation, unkillable processes): kill, then
   * ensure() starts the same container again. Single flight per chat; the notice is recorded for the
   * next result first, so a command cut off by the kill can name the cause. Rejects like ensure().
   */
  async function restartSandbox (entry: Entry, notice: SandboxNotice): Promise<void> {
    if (entry.restarting !== null) { await entry.restarting; return }
    const run = async (): Promise<void> => {
      report(entry, notice, clock.real())
      log.warn({ chat: entry.names.key, reason: notice.kind }, 'restarting a saturated sandbox (files kept, processes lost)')
      await transitions.killKeepingFiles(entry)
      transitions.notifyStop(entry, 'killed')
      await ensure(entry.names.chatId, { user: entry.user })
    }
    entry.restarting = run().finally(() => { entry.restarting = null })
    await entry.restarting
  }

  return { diagnose, pidsNotice, memoryNotice, restartSandbox }
}
