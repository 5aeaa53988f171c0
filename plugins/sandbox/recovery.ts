import { dropAgent } from './agent-connection.js'
import { sleep } from './clock.js'
import { SANDBOX_NOT_RUNNING } from './errors.js'
import { report } from './notices.js'
import type { Chats, Ensure, Entry } from './chats.js'
import { mapError, type CoreBase } from './context.js'
import type { SandboxDetails } from './engine-types.js'
import type { SandboxNotice } from './types.js'

/*
 * A sandbox that stopped or vanished behind the server's back (docker rm -f, docker stop/kill, an
 * engine restart, an OOM kill of its main process) is found out by the next exec that fails with
 * 404/409. That exec starts it again (recreates it on the same volume and data dirs when it was
 * removed), runs once more, and the result says what happened, so the first call after the
 * interference succeeds instead of failing with "not running".
 */

/** How often and how long apart recoverUnstarted asks the engine again while it reports the sandbox running (2 s). */
const UNSTARTED_CHECKS = 8
const UNSTARTED_CHECK_MS = 250

/** True for the coded error of a sandbox found not running (by code: other plugins compare the same way). */
export const notRunning = (err: unknown): boolean => (err as { code?: unknown })?.code === 'SANDBOX_NOT_RUNNING'

/** An event about the sandbox's current life is recorded already (the driver acted, or the reaper saw the change). */
function driverActed (entry: Entry): boolean {
  return entry.notices.actions.some(a => a.at >= entry.startedAt && a.notice.action !== 'none')
}

/** A sandbox that stopped or vanished behind the server's back, started again by the next call. */
export interface Recovery {
  runningEntry: (chatId: string) => Promise<Entry>
  noteOutsideChange: (entry: Entry, removed: boolean) => void
  noteEnded: (entry: Entry) => void
  recoverVanished: (entry: Entry) => Promise<SandboxNotice | undefined>
  recoverUnstarted: (entry: Entry) => Promise<Unstarted>
}

/** What recoverUnstarted found: whether the call may run once more, and the notice of a sandbox it started again. */
export interface Unstarted { retry: boolean, notice?: SandboxNotice }

export function createRecovery (base: Pick<CoreBase, 'engine' | 'log' | 'opts' | 'clock' | 'status'>, chats: Chats, ensure: Ensure): Recovery {
  const { engine, log, opts, clock } = base

  /**
   * The chat's entry with its sandbox running. A sandbox the driver itself stopped (saturation, disk
   * limit) or found stopped behind its back is started again first; one stopped on purpose (stop(),
   * idle, max age, capacity) or never ensured rejects with SANDBOX_NOT_RUNNING.
   */
  async function runningEntry (chatId: string): Promise<Entry> {
    const entry = chats.entryOf(chatId)
    if (entry.restarting !== null) await entry.restarting.catch(() => {})
    if (entry.state === 'running' && entry.sandboxId !== undefined) return entry
    // Paused by the idle reaper: any access wakes it (ensure() unpauses it and counts as activity).
    if (entry.state !== 'paused' && !entry.recoverable) throw new SANDBOX_NOT_RUNNING()
    await ensure(chatId, { user: entry.user })
    return entry
  }

  /**
   * The reaper found a sandbox we believed running stopped or gone, and nobody here did it: the next
   * call starts (or recreates) it, and its result says so.
   */
  function noteOutsideChange (entry: Entry, removed: boolean): void {
    if (entry.stopping || entry.restarting !== null || driverActed(entry)) return
    entry.recoverable = true
    report(entry, removed
      ? { kind: 'sandbox-stopped', action: 'recreated', removed: true, by: 'outside' }
      : { kind: 'sandbox-stopped', action: 'restarted', removed: false, by: 'outside' }, clock.real())
  }

  /**
   * The engine saw the sandbox end (SandboxEngine.watchSandboxes: a pod deleted or evicted) while no
   * start, stop or restart of ours was under way: the next call starts it again and says so, as after a
   * docker rm the reaper found. The agent stream goes at once: it still leads into the ended sandbox
   * (a deleted pod's container outlives its API object), so a call sent on it would be cut off.
   */
  function noteEnded (entry: Entry): void {
    if (entry.locked > 0 || entry.ensuring !== null || entry.stopping || entry.restarting !== null) return
    if (entry.state !== 'running' && entry.state !== 'paused') return
    noteOutsideChange(entry, false)
    dropAgent(entry.agent)
    entry.agent = undefined
    entry.state = 'stopped'
    chats.changed(entry)
  }

  /**
   * An exec or write found the sandbox gone or stopped: ask the engine what happened, start or recreate
   * it through ensure() and record a notice (none when the driver stopped it itself since it last
   * started: that event is already recorded). Rejects like ensure().
   */
  async function recoverVanished (entry: Entry): Promise<SandboxNotice | undefined> {
    return await startAgain(entry, await inspect(entry))
  }

  async function inspect (entry: Entry): Promise<SandboxDetails | null> {
    try {
      return await engine.inspect(entry.names.container)
    } catch (err) { throw mapError(base, err) }
  }

  /** recoverVanished with the engine's answer in hand. */
  async function startAgain (entry: Entry, c: SandboxDetails | null): Promise<SandboxNotice | undefined> {
    // Already explained: the driver acted itself, or the reaper noticed the change first.
    const ours = driverActed(entry)
    let notice: SandboxNotice | undefined
    if (c?.running !== true && !ours) {
      notice = c === null
        ? { kind: 'sandbox-stopped', action: 'recreated', removed: true, by: 'outside' }
        : c.oomKilled
          ? { kind: 'out-of-memory', action: 'restarted', limit: opts.memLimit }
          : { kind: 'sandbox-stopped', action: 'restarted', removed: false, by: 'outside' }
    }
    log.warn({ chat: entry.names.key, found: c === null ? 'removed' : c.running ? 'running' : 'stopped' },
      'the sandbox changed behind the server\'s back; starting it again for this call (workspace kept)')
    if (entry.locked === 0 && entry.ensuring === null && entry.state === 'running') { entry.state = 'unknown'; chats.changed(entry) }
    entry.recoverable = true
    const at = clock.real()
    await ensure(entry.names.chatId, { user: entry.user })
    // Stamped before the start, so this event counts as before the sandbox's new life.
    if (notice !== undefined) report(entry, notice, at)
    return notice
  }

  /**
   * A call's agent stream was lost before its process existed (no SPAWNED, agent-exec.ts): nothing of it ran,
   * so it may run once more. A sandbox the engine reports stopped or gone is started again first, as
   * recoverVanished does (a docker kill the server had not seen yet when it sent the request: the notice says
   * so); one still running (the agent alone went away, or the driver restarted the sandbox meanwhile) is
   * used as it is. No retry when the server stopped the sandbox on purpose meanwhile: the caller reports the loss.
   */
  async function recoverUnstarted (entry: Entry): Promise<Unstarted> {
    if (entry.restarting !== null) await entry.restarting.catch(() => {})
    // The server shutting down closed the stream, or stopped the sandbox itself (stop(), not the driver's restart).
    const onPurpose = (): boolean => base.status.closed || entry.stopping || (entry.state !== 'running' && entry.state !== 'unknown' && !entry.recoverable)
    if (onPurpose()) return { retry: false }
    // The engine may still report a killed sandbox running for a moment after its streams closed (then an exec
    // started in it fails: "cannot exec in a deleted state"): a stream of the agent alone ends rarely, so wait.
    let c = await inspect(entry)
    for (let i = 0; i < UNSTARTED_CHECKS && c?.running === true; i++) {
      await sleep(UNSTARTED_CHECK_MS)
      c = await inspect(entry)
    }
    if (c?.running === true) return { retry: true }
    if (onPurpose()) return { retry: false }
    return { retry: true, notice: await startAgain(entry, c) }
  }

  return { runningEntry, noteOutsideChange, noteEnded, recoverVanished, recoverUnstarted }
}
