import { withLock, type Chats, type Entry } from './chats.js'
import { mapError, type CoreBase } from './context.js'
import { isEngineFailure } from './engine-error.js'
import { SANDBOX_NOT_RUNNING } from './errors.js'
import type { StopReason, StopHook } from './types.js'

/*
 * The transitions of a chat's sandbox that several roles share (docs/engine.md#the-core-inside): a stop
 * under the chat's lock (explicit stop, idle reaper, capacity), a kill that keeps the files (saturation,
 * disk limit), an exec that found the sandbox gone, and telling the onStop hooks. Only stop and kill
 * talk to the engine.
 */

export interface Transitions {
  /** onStop of the contract (types.ts) */
  addStopHook: (hook: StopHook) => void
  /** Drops the chat's address and tells every onStop hook. */
  notifyStop: (entry: Entry, reason: StopReason) => void
  /** The engine's stop under the chat's lock; the sandbox is not recoverable afterwards. */
  stopEntry: (entry: Entry, reason: StopReason) => Promise<void>
  /**
   * The idle reaper's pause (docs/engine.md#what-an-engine-implements): the sandbox's processes are frozen
   * with their memory, under the chat's lock; the next ensure() or exec wakes it (lifecycle.ts). Skipped
   * when the chat was taken meanwhile. The onStop hooks hear the reason 'paused'; the address is kept.
   */
  pauseEntry: (entry: Entry) => Promise<void>
  /**
   * Kills the chat's sandbox under its lock and marks it stopped but recoverable: files stay, processes
   * are lost, the next ensure() starts it again. Rejects with the mapped engine error.
   */
  killKeepingFiles: (entry: Entry) => Promise<void>
  /**
   * An exec failed to start: a sandbox found gone or stopped behind our back invalidates the cache and
   * marks the chat for recovery (recovery.ts starts it again); SANDBOX_NOT_RUNNING. Else mapError.
   */
  execStartError: (entry: Entry, err: unknown) => Error
}

export function createTransitions (base: Pick<CoreBase, 'engine' | 'log' | 'opts' | 'status' | 'clock'>, chats: Chats,
  dropAddress: (entry: Entry) => void): Transitions {
  const { engine, log, opts } = base
  const stopHooks: StopHook[] = []

  function notifyStop (entry: Entry, reason: StopReason): void {
    // A paused sandbox keeps its address: it is the same start when it wakes.
    if (reason !== 'paused') dropAddress(entry)
    for (const hook of stopHooks) {
      try { hook(entry.names.chatId, reason) } catch (err) { log.warn({ err }, 'an onStop hook failed') }
    }
  }

  async function stopEntry (entry: Entry, reason: StopReason): Promise<void> {
    entry.stopping = true
    try {
      await withLock(entry, async () => {
        try {
          const id = entry.sandboxId ?? entry.names.container
          // Thawed first, so that its processes get SIGTERM and the grace instead of only SIGKILL at its end.
          if (entry.state === 'paused') await engine.unpause(id).catch(() => {})
          await engine.stop(id, opts.stopGraceS)
        } catch (err) { throw mapError(base, err) }
        entry.state = entry.state === 'absent' ? 'absent' : 'stopped'
        entry.recoverable = false
        chats.changed(entry)
        log.info({ chat: entry.names.key, reason }, 'sandbox stopped')
      })
    } finally { entry.stopping = false }
    notifyStop(entry, reason)
  }

  async function pauseEntry (entry: Entry): Promise<void> {
    const paused = await withLock(entry, async () => {
      if (entry.state !== 'running' || entry.sandboxId === undefined || entry.callLeases + entry.socketLeases > 0) return false
      try {
        await engine.pause(entry.sandboxId)
      } catch (err) { throw mapError(base, err) }
      entry.state = 'paused'
      entry.pausedAt = base.clock.now()
      chats.changed(entry)
      log.info({ chat: entry.names.key }, 'sandbox paused (idle)')
      return true
    })
    if (paused) notifyStop(entry, 'paused')
  }

  async function killKeepingFiles (entry: Entry): Promise<void> {
    await withLock(entry, async () => {
      try {
        await engine.kill(entry.sandboxId ?? entry.names.container)
      } catch (err) { throw mapError(base, err) }
      entry.state = 'stopped'
      entry.recoverable = true
      chats.changed(entry)
    })
  }

  function execStartError (entry: Entry, err: unknown): Error {
    const reason = isEngineFailure(err) ? err.reason : undefined
    if (reason === 'no-such-sandbox' || reason === 'conflict' || reason === 'not-running') {
      if (entry.locked === 0 && entry.ensuring === null) { entry.state = 'unknown'; entry.recoverable = true; chats.changed(entry); dropAddress(entry) }
      return new SANDBOX_NOT_RUNNING()
    }
    return mapError(base, err)
  }

  return { addStopHook: hook => { stopHooks.push(hook) }, notifyStop, stopEntry, pauseEntry, killKeepingFiles, execStartError }
}
