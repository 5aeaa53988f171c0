import type { RequestUser } from '../../core/identity.js'
import { metaUserChanged, type Activity } from './activity.js'
import type { Addresses } from './addresses.js'
import { agentOf, type Agents } from './agent-client.js'
import type { Boot } from './boot.js'
import { infoOf, withLock, type Chats, type Entry } from './chats.js'
import { engineUnavailable, mapError, type CoreBase } from './context.js'
import { loadMeta } from './data-dirs.js'
import type { DiskQuota } from './disk-quota.js'
import { SANDBOX_CREATE_TIMEOUT } from './errors.js'
import type { ExtraMounts } from './extra-mounts.js'
import { createdAtOf } from './names.js'
import type { SandboxNetwork } from './network.js'
import { loadBinding, type PoolClaim } from './pool-claim.js'
import type { Readiness, SandboxIds } from './readiness.js'
import type { Reaper } from './reaper.js'
import { createStarter, type Container, type Ensured } from './sandbox-start.js'
import type { Transitions } from './transitions.js'
import type { EnsureHook, EnsureOptions, SandboxInfo, SandboxStatus, StartHook } from './types.js'

/*
 * ensure() (docs/contract.md#creation): per-chat single flight, the choice between waking, starting,
 * claiming from the warm pool and creating (the steps themselves: sandbox-start.ts, pool-claim.ts),
 * capacity, the ready probe with the onStart hooks' files and meta.json alongside (the README: written while
 * the agent starts), outputs ownership, then the onEnsure hooks once the lock is released (a hook may use
 * the sandbox); status() and remove().
 */

/** What ensure(), status() and remove() build on. */
export interface LifecycleDeps {
  activity: Pick<Activity, 'activity' | 'saveMeta'>
  addresses: Pick<Addresses, 'addressOn' | 'dropAddress' | 'learnAddress' | 'publishAddress'>
  agents: Pick<Agents, 'openAgent'>
  boot: Pick<Boot, 'bootstrap'>
  network: Pick<SandboxNetwork, 'prepareNetwork'>
  mounts: Pick<ExtraMounts, 'extraMounts'>
  quota: Pick<DiskQuota, 'settingsWithQuota' | 'quotaOutcome'>
  readiness: Pick<Readiness, 'waitReady' | 'fixOwnership'>
  poolClaim: Pick<PoolClaim, 'claim'>
  reaper: Pick<Reaper, 'reserveSlot'>
  transitions: Pick<Transitions, 'notifyStop'>
}

/** A chat's sandbox brought to running, its state, its removal. */
export interface Lifecycle {
  ensure: (chatId: string, opts?: EnsureOptions) => Promise<SandboxInfo>
  /** Never creates or starts anything; refreshes the cached state unless an ensure is in flight. */
  status: (chatId: string) => Promise<SandboxStatus>
  remove: (chatId: string, opts?: { purge?: boolean }) => Promise<void>
  /** onEnsure (docs/contract.md#sandbox) */
  addHook: (hook: EnsureHook) => void
  /** onStart (types.ts StartHook) */
  addStartHook: (hook: StartHook) => void
}

export function createLifecycle (base: Pick<CoreBase, 'engine' | 'log' | 'opts' | 'clock' | 'status' | 'settings'>, chats: Chats, d: LifecycleDeps): Lifecycle {
  const { engine, log, clock } = base
  const { activity, addresses, agents, boot, network, mounts, quota, readiness, poolClaim, reaper, transitions } = d
  const hooks: EnsureHook[] = []
  const startHooks: StartHook[] = []
  const { wake, startStopped, create } = createStarter(base, chats, { activity, network, quota, reaper })

  async function ensure (chatId: string, opts: EnsureOptions = {}): Promise<SandboxInfo> {
    if (base.status.closed) throw engineUnavailable(base)
    const entry = chats.entryOf(chatId)
    if (opts.user !== undefined) entry.user = opts.user
    activity.activity(entry)
    // Fast path: known running and nobody is changing it; no Docker call at all.
    if (entry.state === 'running' && entry.sandboxId !== undefined && entry.locked === 0 && !entry.stopping) {
      const info = infoOf(entry)
      if (opts.user !== undefined && metaUserChanged(entry, opts.user)) void activity.saveMeta(entry, opts.user).catch(() => {})
      await runHooks(info, false, opts.user)
      return info
    }
    if (entry.ensuring === null) {
      // Hooks run after the lock is released, so a hook may itself call ensure(), exec() or putFile().
      const op = withLock(entry, async () => await doEnsure(entry, opts.user)).then(async result => {
        await runHooks(result.info, result.started, opts.user)
        return result
      })
      entry.ensuring = op
      op.then(() => {}, () => {}).finally(() => { if (entry.ensuring === op) entry.ensuring = null })
    }
    const op = entry.ensuring
    const timeoutMs = opts.timeoutMs ?? base.opts.createTimeoutS * 1000
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new SANDBOX_CREATE_TIMEOUT(Math.max(1, Math.round(timeoutMs / 1000)))), timeoutMs)
    })
    try {
      const { info } = await Promise.race([op, timeout])
      return info
    } finally { clearTimeout(timer) }
  }

  async function doEnsure (entry: Entry, user: RequestUser | undefined): Promise<Ensured> {
    try {
      await boot.bootstrap()
    } catch (err) {
      throw mapError(base, err)
    }
    const { names } = entry
    // Paused by the idle reaper: thawed, and the same start goes on (no start, probe or address change).
    if (entry.state === 'paused' && entry.sandboxId !== undefined) {
      const woken = await wake(entry)
      if (woken !== null) return woken
    }
    try {
      await base.opts.storage.prepare(names.chatId)
      // A chat that claimed a pool sandbox once keeps its home volume (pool-claim.ts) through every recreation.
      await loadBinding(base.opts, entry)
      let existing = await engine.inspect(names.container)
      // Paused (before this server started, or behind its back): thawed as it is.
      if (existing?.paused === true) {
        await engine.unpause(existing.id)
        existing = { ...existing, running: true, paused: false }
      }
      let container: Container | null = existing
      let started = false
      const extra = existing === null || !existing.running ? await mounts.extraMounts(entry, user) : []
      if (existing !== null && !existing.running) {
        container = await startStopped(entry, existing, user, extra)
        started = container !== null
      }
      // A new chat takes a started, ready sandbox from the warm pool when one matches (pool-claim.ts).
      const claimed = existing === null ? await poolClaim.claim(entry, user, extra) : null
      if (claimed !== null) { container = claimed.container; started = true }
      if (container === null) {
        await reaper.reserveSlot(entry)
        container = await create(entry, user, extra)
        started = true
      }
      entry.sandboxId = container.id
      entry.createdAt = createdAtOf(container.labels)
      // A started sandbox's agent opens now: its exec and python's start (~0.1 s idle, seconds under load)
      // overlap the ready probe, ownership, meta.json and the hooks (bench/profile-first-call.ts). A claimed
      // pool sandbox brings its open one (pool-claim.ts).
      if (started) void agents.openAgent(agentOf(entry, container.id)).catch(() => {})
      // The address this start gave (a restarted sandbox may get another chat's old one) is published
      // before ensure() resolves, so the egress proxy knows the chat from its first command (addresses.ts).
      if (!started && existing !== null) addresses.publishAddress(entry, addresses.addressOn(existing))
      // The start hooks' files (the README) go through the engine while the agent starts: they need neither.
      const writing = started ? runStartHooks(names.chatId, container.id, user) : undefined
      // meta.json too (an fsynced write, up to tens of ms while Docker starts containers): it needs nothing
      // of the ready sandbox. Awaited once the sandbox is ready; a failed start's own error wins.
      const meta = activity.saveMeta(entry, user, true)
      meta.catch(() => {})
      // A sandbox of network mode none (egress over the agent socket, or ENABLE_NETWORK=false; a stopped one
      // of another mode was recreated by drift) has no address: no inspect on a new chat's first call.
      const learning = !started ? undefined : base.settings.networkMode === 'none' ? addresses.dropAddress(entry) : addresses.learnAddress(entry, container.id)
      let ids: SandboxIds | null
      try {
        [ids] = await Promise.all([claimed !== null ? claimed.ids : readiness.waitReady(entry), learning])
      } finally { await writing }
      entry.state = 'running'
      entry.recoverable = false
      entry.startedAt = clock.real()
      chats.changed(entry)
      await readiness.fixOwnership({ chat: names.key }, ids)
      await meta
      const info = infoOf(entry)
      activity.activity(entry)
      return { info, started }
    } catch (err) {
      if (entry.state !== 'running') { entry.state = 'unknown'; chats.changed(entry) }
      throw mapError(base, err)
    } finally {
      chats.starting.delete(entry)
    }
  }

  /** The onStart hooks, at once (each only writes files through the engine); a failure is logged. Never rejects. */
  async function runStartHooks (chatId: string, sandboxId: string, user: RequestUser | undefined): Promise<void> {
    const put = async (path: string, content: Buffer | string, o: { mode?: number, uid?: number, gid?: number } = {}): Promise<void> => {
      if (!path.startsWith('/') || path.endsWith('/')) throw new TypeError('a start file needs an absolute file path')
      await engine.putFile(sandboxId, path, Buffer.isBuffer(content) ? content : Buffer.from(content, 'utf8'), o.mode ?? 0o644, o.uid ?? 0, o.gid ?? 0)
    }
    await Promise.all(startHooks.map(async hook => {
      try {
        await hook({ chatId, sandboxId }, user === undefined ? {} : { user }, { put })
      } catch (err) {
        log.warn({ chat: chats.entryOf(chatId).names.key, err }, 'an onStart hook failed')
      }
    }))
  }

  async function runHooks (info: SandboxInfo, started: boolean, user: RequestUser | undefined): Promise<void> {
    for (const hook of hooks) {
      try {
        await hook(info, { started, user })
      } catch (err) {
        log.warn({ chat: info.chatKey, err }, 'an onEnsure hook failed')
      }
    }
  }

  /** Never creates or starts anything; refreshes the cached state unless an ensure is in flight. */
  async function statusOf (chatId: string): Promise<SandboxStatus> {
    const entry = chats.entryOf(chatId)
    const metaExists = await loadMeta(base.opts.storage, chatId) !== null
    let c
    try {
      c = await engine.inspect(entry.names.container)
    } catch (err) { throw mapError(base, err) }
    if (entry.locked === 0 && entry.ensuring === null) {
      // A container we did not know about counts as discovered now (like re-adoption), not as idle since ever.
      if (c?.running === true && entry.state !== 'running') entry.lastActive = Math.max(entry.lastActive, clock.now())
      if (c?.paused === true && entry.state !== 'paused') entry.pausedAt = clock.now()
      entry.state = c === null ? 'absent' : c.running ? 'running' : c.paused === true ? 'paused' : 'stopped'
      if (c !== null) { entry.sandboxId = c.id; entry.createdAt = createdAtOf(c.labels) }
      if (c?.running !== true && c?.paused !== true) addresses.dropAddress(entry)
      chats.changed(entry)
    }
    if (c === null) return { state: 'absent', metaExists }
    // Paused counts as running: the next exec or ensure() wakes it.
    if (c.paused === true) return { state: 'running', paused: true, metaExists, sandboxId: c.id }
    return { state: c.running ? 'running' : 'stopped', metaExists, sandboxId: c.id }
  }

  /** Removes the container under the chat's lock; `purge` also deletes the volume and the data dir. */
  async function remove (chatId: string, opts: { purge?: boolean } = {}): Promise<void> {
    const entry = chats.entryOf(chatId)
    await withLock(entry, async () => {
      try {
        await loadBinding(base.opts, entry)
        await engine.remove(entry.names.container)
        entry.state = 'absent'
        entry.sandboxId = undefined
        entry.recoverable = false
        chats.changed(entry)
        if (opts.purge === true) {
          await engine.removeVolume(entry.names.volume)
          await base.opts.storage.purgeKey(entry.names.key)
          entry.meta = undefined
          entry.metaLoaded = false
        }
      } catch (err) { throw mapError(base, err) }
    })
    transitions.notifyStop(entry, opts.purge === true ? 'purged' : 'removed')
  }

  return { ensure, status: statusOf, remove, addHook: hook => { hooks.push(hook) }, addStartHook: hook => { startHooks.push(hook) } }
}
