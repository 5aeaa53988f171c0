import type { DiskState } from './disk-quota.js'
import type { SandboxNotice } from './types.js'

/*
 * What the driver did to a chat's sandbox on its own (restart after saturation, recreation after it
 * vanished, disk-limit stop), kept per chat until a command result reports it (CommandResult.notices).
 * `actions` remembers recent events with their time, so a command whose sandbox went away under it
 * can say why even when another call already reported the event.
 */

export interface NoticeLog {
  /** not yet reported, oldest first */
  pending: SandboxNotice[]
  /** recent events (ms, real time: clock.ts), oldest first */
  actions: Array<{ at: number, notice: SandboxNotice }>
}

/** What these functions read of a chat's entry (chats.ts). */
type Noted = { notices: NoticeLog }

const KEEP = 8

const same = (a: SandboxNotice, b: SandboxNotice): boolean => a.kind === b.kind && a.action === b.action

/** Records an event (at `at`, real time) for the next result (an equal pending notice is replaced by the newer one). */
export function report (entry: Noted, notice: SandboxNotice, at: number): void {
  const log = entry.notices
  log.pending = log.pending.filter(n => !same(n, notice))
  log.pending.push(notice)
  if (log.pending.length > KEEP) log.pending.splice(0, log.pending.length - KEEP)
  log.actions.push({ at, notice })
  if (log.actions.length > KEEP) log.actions.splice(0, log.actions.length - KEEP)
}

/** The latest event recorded at or after `since` (why a command's sandbox went away), if any. */
export function eventSince (entry: Noted, since: number): SandboxNotice | undefined {
  for (let i = entry.notices.actions.length - 1; i >= 0; i--) {
    const a = entry.notices.actions[i]
    if (a !== undefined && a.at >= since) return a.notice
  }
  return undefined
}

/**
 * The notices of one result: `first` (the cause of this command's outcome) and the call's own events,
 * then everything pending, each once; pending ones are marked reported. While the chat is over its
 * disk limit, a `disk-limit` warning is added unless a disk-limit notice is already in the list.
 */
export function takeNotices (entry: Noted & { disk: DiskState }, own: SandboxNotice[] = []): SandboxNotice[] {
  const out: SandboxNotice[] = []
  const add = (n: SandboxNotice): void => { if (!out.some(o => o === n || same(o, n))) out.push(n) }
  for (const n of own) add(n)
  for (const n of entry.notices.pending) add(n)
  entry.notices.pending = []
  const over = entry.disk.over
  if (over !== null && !out.some(n => n.kind === 'disk-limit')) add({ kind: 'disk-limit', action: 'none', limit: over.limit, usage: over.usage })
  return out
}
