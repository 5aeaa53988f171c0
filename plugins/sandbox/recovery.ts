import { SANDBOX_NOT_RUNNING } from './errors.js'
import { ensure } from './lifecycle.js'
import { report } from './notices.js'
import { changed, entryOf, mapError, type Entry, type Registry } from './registry.js'
import type { SandboxNotice } from './types.js'

/*
 * A sandbox that stopped or vanished behind the server's back (docker rm -f, docker stop/kill, an
 * engine restart, an OOM kill of its main process) is found out by the next exec that fails with
 * 404/409. That exec starts it again (recreates it on the same volume and data dirs when it was
 * removed), runs once more, and the result says what happened, so the first call after the
 * interference succeeds instead of failing with "not running".
 */

/** True for the coded error of a sandbox found not running (by code: other plugins compare the same way). */
export const notRunning = (err: unknown): boolean => (err as { code?: unknown })?.code === 'SANDBOX_NOT_RUNNING'

/**
 * The chat's entry with its sandbox running. A sandbox the driver itself stopped (saturation, disk
 * limit) or found stopped behind its back is started again first; one stopped on purpose (stop(),
 * idle, max age, capacity) or never ensured rejects with SANDBOX_NOT_RUNNING.
 */
export async function runningEntry (reg: Registry, chatId: string): Promise<Entry> {
  const entry = entryOf(reg, chatId)
  if (entry.restarting !== null) await entry.restarting.catch(() => {})
  if (entry.state === 'running' && entry.sandboxId !== undefined) return entry
  if (!entry.recoverable) throw new SANDBOX_NOT_RUNNING()
  await ensure(reg, chatId, { user: entry.user })
  return entry
}

/** An event about the sandbox's current life is recorded already (the driver acted, or the reaper saw the change). */
function driverActed (entry: Entry): boolean {
  return entry.notices.actions.some(a => a.at >= entry.startedAt && a.notice.action !== 'none')
}

/**
 * The reaper found a sandbox we believed running stopped or gone, and nobody here did it: the next
 * call starts (or recreates) it, and its result says so.
 */
export function noteOutsideChange (entry: Entry, removed: boolean): void {
  if (entry.stopping || entry.restarting !== null || driverActed(entry)) return
  entry.recoverable = true
  report(entry, removed
    ? { kind: 'sandbox-stopped', action: 'recreated', removed: true, by: 'outside' }
    : { kind: 'sandbox-stopped', action: 'restarted', removed: false, by: 'outside' })
}

/**
 * An exec or write found the sandbox gone or stopped: ask the engine what happened, start or recreate
 * it through ensure() and record a notice (none when the driver stopped it itself since it last
 * started: that event is already recorded). Rejects like ensure().
 */
export async function recoverVanished (reg: Registry, entry: Entry): Promise<SandboxNotice | undefined> {
  let c
  try {
    c = await reg.engine.inspect(entry.names.container)
  } catch (err) { throw mapError(reg, err) }
  // Already explained: the driver acted itself, or the reaper noticed the change first.
  const ours = driverActed(entry)
  let notice: SandboxNotice | undefined
  if (c?.running !== true && !ours) {
    notice = c === null
      ? { kind: 'sandbox-stopped', action: 'recreated', removed: true, by: 'outside' }
      : c.oomKilled
        ? { kind: 'out-of-memory', action: 'restarted', limit: reg.opts.memLimit }
        : { kind: 'sandbox-stopped', action: 'restarted', removed: false, by: 'outside' }
  }
  reg.log.warn({ chat: entry.names.key, found: c === null ? 'removed' : c.running ? 'running' : 'stopped' },
    'the sandbox changed behind the server\'s back; starting it again for this call (workspace kept)')
  if (entry.locked === 0 && entry.ensuring === null && entry.state === 'running') { entry.state = 'unknown'; changed(reg, entry) }
  entry.recoverable = true
  const at = Date.now()
  await ensure(reg, entry.names.chatId, { user: entry.user })
  // Stamped before the start, so this event counts as before the sandbox's new life.
  if (notice !== undefined) report(entry, notice, at)
  return notice
}
