import { chatPaths } from '../../core/chat-paths.js'
import { treeUsage } from './disk-usage.js'
import { MANAGED_BY } from './names.js'
import { killKeepingFiles } from './kill-keeping-files.js'
import { report } from './notices.js'
import { notifyStop, type Entry, type Registry } from './registry.js'
import type { DiskUsage } from './types.js'

/*
 * The soft part of SANDBOX_DISK_LIMIT (disk-quota.ts has the hard part). Every diskCheckIntervalMs,
 * for the running sandboxes only (an idle-stopped chat cannot grow), one pass measures what each chat
 * occupies: its home volume and its writable layer as the engine reports them (`GET /system/df`),
 * plus its outputs walked on the host (disk-usage.ts). Nothing the sandbox reports is used.
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

/** One pass (single flight). Never throws. */
export async function diskPass (reg: Registry): Promise<void> {
  if (reg.opts.diskLimit <= 0) return
  reg.diskPass ??= passOnce(reg)
    .catch(err => { reg.log.warn({ err }, 'disk watchdog pass failed') })
    .finally(() => { reg.diskPass = null })
  await reg.diskPass
}

/** After a command of a chat over its limit: measure again soon (debounced, one pending at a time). */
export function pokeDiskWatchdog (reg: Registry, entry: Entry): void {
  if (reg.opts.diskLimit <= 0 || entry.disk.over === null || reg.diskPoke !== undefined || reg.closed) return
  reg.diskPoke = setTimeout(() => {
    reg.diskPoke = undefined
    void diskPass(reg)
  }, POKE_MS)
  reg.diskPoke.unref()
}

async function passOnce (reg: Registry): Promise<void> {
  if (reg.closed || !reg.bootstrapped) return
  const running = [...reg.entries.values()].filter(e => e.state === 'running' && e.sandboxId !== undefined && e.restarting === null)
  if (running.length === 0) return
  const df = await engineUsage(reg)
  if (df === null) return
  let budget = PASS_MAX_ENTRIES
  for (const entry of running) {
    if (reg.closed) return
    const m = await measure(reg, entry, df, budget)
    budget -= m.entries
    await judge(reg, entry, m.usage)
  }
}

type EngineUsage = Awaited<ReturnType<Registry['engine']['diskUsage']>>

/** One `GET /system/df`, or null (logged) when the engine does not answer it. */
async function engineUsage (reg: Registry): Promise<EngineUsage | null> {
  try {
    return await reg.engine.diskUsage()
  } catch (err) {
    reg.log.debug({ err }, 'disk watchdog: the engine did not report disk usage; pass skipped')
    return null
  }
}

/** A chat's usage: home volume and writable layer from the engine, outputs walked on the host (`budget` entries at most). */
async function measure (reg: Registry, entry: Entry, df: EngineUsage, budget: number): Promise<{ usage: DiskUsage, entries: number }> {
  const ours = (labels: Record<string, string>): boolean => labels['managed-by'] === MANAGED_BY && labels['cu.prefix'] === reg.opts.prefix
  const home = Math.max(0, df.volumes.find(v => v.name === entry.names.volume && ours(v.labels))?.size ?? 0)
  const other = df.sandboxes.find(c => c.name === entry.names.container && ours(c.labels))?.writable ?? 0
  if (budget <= 0) return { usage: { total: home + other, home, outputs: 0, other }, entries: 0 }
  // Under the limit so far: stop as soon as outputs decide it. Over already: measure them for the message.
  const room = reg.opts.diskLimit - home - other
  const u = await treeUsage(chatPaths(reg.opts.dataDir, entry.names.chatId).outputs,
    { maxEntries: Math.min(CHAT_MAX_ENTRIES, budget), ...(room >= 0 ? { stopAbove: room } : {}) })
  return { usage: { total: home + u.bytes + other, home, outputs: u.bytes, other }, entries: u.entries }
}

async function judge (reg: Registry, entry: Entry, usage: DiskUsage): Promise<void> {
  const limit = reg.opts.diskLimit
  const d = entry.disk
  if (usage.total <= limit) {
    if (d.over !== null) reg.log.info({ chat: entry.names.key, total: usage.total, limit }, 'chat back under its disk limit')
    d.over = null
    d.stoppedAt = 0
    return
  }
  d.over = { usage, limit }
  if (d.stoppedAt > 0 && usage.total <= d.stoppedTotal + regrowth(limit)) return
  if (entry.state !== 'running' || entry.restarting !== null || entry.sandboxId === undefined) return
  d.stoppedAt = Date.now()
  d.stoppedTotal = usage.total
  const notice = { kind: 'disk-limit' as const, action: 'stopped' as const, limit, usage }
  report(entry, notice)
  reg.log.warn({ chat: entry.names.key, ...usage, limit }, 'chat over its disk limit: sandbox stopped (files kept)')
  try {
    await killKeepingFiles(reg, entry)
  } catch (err) {
    reg.log.error({ chat: entry.names.key, err }, 'stopping a chat over its disk limit failed')
    return
  }
  notifyStop(reg, entry, 'disk-limit')
  await settle(reg, entry, notice)
}

/**
 * Measures a chat again once its writers are dead: what they wrote between the measure and the kill
 * is the baseline of the regrowth rule (else it would stop the chat again at its next start) and the
 * figure the next warnings show.
 */
async function settle (reg: Registry, entry: Entry, notice: { usage: DiskUsage }): Promise<void> {
  const df = await engineUsage(reg)
  if (df === null) return
  const { usage } = await measure(reg, entry, df, CHAT_MAX_ENTRIES)
  const d = entry.disk
  if (usage.total <= d.stoppedTotal) return
  d.stoppedTotal = usage.total
  notice.usage = usage
  if (d.over !== null) d.over = { usage, limit: d.over.limit }
}
