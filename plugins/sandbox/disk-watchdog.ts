import { MANAGED_BY } from './names.js'
import { report } from './notices.js'
import type { Chats, Entry } from './chats.js'
import type { DiskUsageReport } from './engine-types.js'
import type { CoreBase } from './context.js'
import type { Transitions } from './transitions.js'
import type { DiskUsage } from './types.js'

/*
 * The soft part of SANDBOX_DISK_LIMIT (disk-quota.ts has the hard part). Every diskCheckIntervalMs,
 * for the running sandboxes only (an idle-stopped chat cannot grow), one pass measures what each chat
 * occupies: its home volume and its writable layer as the engine reports them (`GET /system/df`),
 * plus its outputs measured by chat-storage (`usage`: a bounded walk by descriptor on the local filesystem). Nothing the sandbox reports is used.
 *
 * A chat over its limit is killed at once (its writers stop; every file is kept) and the next command
 * result says what uses the space. The next call starts the sandbox again so the model can delete
 * files; while the chat stays over its limit every result repeats the warning, each of its commands
 * triggers a quick re-measure, and it is killed again only if it grows a margin beyond the usage
 * measured once its writers were dead. One pass at a time; a failing engine call skips the pass.
 */

/** Entries of outputs walked per chat and per pass at most (the rest is a lower bound). */
const CHAT_MAX_ENTRIES = 100_000
const PASS_MAX_ENTRIES = 400_000
/** Growth allowed above the usage at the last stop before stopping again: 5 % of the limit, at least 16 MiB. */
const regrowth = (limit: number): number => Math.max(limit * 0.05, 16 * 1024 * 1024)
const POKE_MS = 1000

type EngineUsage = DiskUsageReport

/** SANDBOX_DISK_LIMIT's watchdog: passes, the quick re-measure after a command, and its timers. */
export interface DiskWatchdog {
  /** One pass (single flight). Never throws. */
  pass: () => Promise<void>
  /** After a command of a chat over its limit: measure again soon (debounced, one pending at a time). */
  poke: (entry: Entry) => void
  /** Starts the periodic passes (no-op without a disk limit). */
  start: () => void
  /** Stops the timers. */
  stop: () => void
}

export function createDiskWatchdog (base: Pick<CoreBase, 'engine' | 'log' | 'opts' | 'clock' | 'status'>, chats: Chats, transitions: Pick<Transitions, 'killKeepingFiles' | 'notifyStop'>): DiskWatchdog {
  const { engine, log, clock, status } = base
  /** the pass in flight (single flight) */
  let inFlight: Promise<void> | null = null
  /** an extra pass scheduled after a command of a chat over its limit */
  let poked: NodeJS.Timeout | undefined
  let timer: NodeJS.Timeout | undefined

  /** One pass (single flight). Never throws. */
  async function diskPass (): Promise<void> {
    if (base.opts.diskLimit <= 0) return
    inFlight ??= passOnce()
      .catch(err => { log.warn({ err }, 'disk watchdog pass failed') })
      .finally(() => { inFlight = null })
    await inFlight
  }

  /** After a command of a chat over its limit: measure again soon (debounced, one pending at a time). */
  function pokeDiskWatchdog (entry: Entry): void {
    if (base.opts.diskLimit <= 0 || entry.disk.over === null || poked !== undefined || status.closed) return
    poked = setTimeout(() => {
      poked = undefined
      void diskPass()
    }, POKE_MS)
    poked.unref()
  }

  async function passOnce (): Promise<void> {
    if (status.closed || !status.bootstrapped) return
    const running = [...chats.entries.values()].filter(e => e.state === 'running' && e.sandboxId !== undefined && e.restarting === null)
    if (running.length === 0) return
    const df = await engineUsage()
    if (df === null) return
    let budget = PASS_MAX_ENTRIES
    for (const entry of running) {
      if (status.closed) return
      const m = await measure(entry, df, budget)
      budget -= m.entries
      await judge(entry, m.usage)
    }
  }

  /** One `GET /system/df`, or null (logged) when the engine does not answer it. */
  async function engineUsage (): Promise<EngineUsage | null> {
    try {
      return await engine.diskUsage()
    } catch (err) {
      log.debug({ err }, 'disk watchdog: the engine did not report disk usage; pass skipped')
      return null
    }
  }

  /** A chat's usage: home volume and writable layer from the engine, outputs measured by chat-storage (`budget` entries at most). */
  async function measure (entry: Entry, df: EngineUsage, budget: number): Promise<{ usage: DiskUsage, entries: number }> {
    const ours = (labels: Record<string, string>): boolean => labels['managed-by'] === MANAGED_BY && labels['cu.prefix'] === base.opts.prefix
    const home = Math.max(0, df.volumes.find(v => v.name === entry.names.volume && ours(v.labels))?.size ?? 0)
    const other = df.sandboxes.find(c => c.name === entry.names.container && ours(c.labels))?.writable ?? 0
    if (budget <= 0) return { usage: { total: home + other, home, outputs: 0, other }, entries: 0 }
    // Under the limit so far: stop as soon as outputs decide it. Over already: measure them for the message.
    const room = base.opts.diskLimit - home - other
    const u = await base.opts.storage.usage(entry.names.chatId, 'outputs',
      { maxEntries: Math.min(CHAT_MAX_ENTRIES, budget), ...(room >= 0 ? { stopAbove: room } : {}) })
    return { usage: { total: home + u.bytes + other, home, outputs: u.bytes, other }, entries: u.entries }
  }

  async function judge (entry: Entry, usage: DiskUsage): Promise<void> {
    const limit = base.opts.diskLimit
    const d = entry.disk
    if (usage.total <= limit) {
      if (d.over !== null) log.info({ chat: entry.names.key, total: usage.total, limit }, 'chat back under its disk limit')
      d.over = null
      d.stoppedAt = 0
      return
    }
    d.over = { usage, limit }
    if (d.stoppedAt > 0 && usage.total <= d.stoppedTotal + regrowth(limit)) return
    if (entry.state !== 'running' || entry.restarting !== null || entry.sandboxId === undefined) return
    d.stoppedAt = clock.real()
    d.stoppedTotal = usage.total
    const notice = { kind: 'disk-limit' as const, action: 'stopped' as const, limit, usage }
    report(entry, notice, clock.real())
    log.warn({ chat: entry.names.key, ...usage, limit }, 'chat over its disk limit: sandbox stopped (files kept)')
    try {
      await transitions.killKeepingFiles(entry)
    } catch (err) {
      log.error({ chat: entry.names.key, err }, 'stopping a chat over its disk limit failed')
      return
    }
    transitions.notifyStop(entry, 'disk-limit')
    await settle(entry, notice)
  }

  /**
   * Measures a chat again once its writers are dead: what they wrote between the measure and the kill
   * is the baseline of the regrowth rule (else it would stop the chat again at its next start) and the
   * figure the next warnings show.
   */
  async function settle (entry: Entry, notice: { usage: DiskUsage }): Promise<void> {
    const df = await engineUsage()
    if (df === null) return
    const { usage } = await measure(entry, df, CHAT_MAX_ENTRIES)
    const d = entry.disk
    if (usage.total <= d.stoppedTotal) return
    d.stoppedTotal = usage.total
    notice.usage = usage
    if (d.over !== null) d.over = { usage, limit: d.over.limit }
  }

  return {
    pass: diskPass,
    poke: pokeDiskWatchdog,
    start: () => {
      if (base.opts.diskLimit <= 0) return
      timer = setInterval(() => { void diskPass() }, base.opts.diskCheckIntervalMs)
      timer.unref()
    },
    stop: () => { clearInterval(timer); clearTimeout(poked) }
  }
}
