import type { RequestUser } from '../../core/identity.js'
import { metaUserChanged, type Activity } from './activity.js'
import type { Addresses } from './addresses.js'
import { agentOf, type Agents } from './agent-client.js'
import type { Boot } from './boot.js'
import { infoOf, withLock, type Chats, type Entry } from './chats.js'
import { sleep } from './clock.js'
import { engineUnavailable, imageMissing, mapError, tooOld, type CoreBase } from './context.js'
import { loadMeta } from './data-dirs.js'
import { isQuotaRefusal, type DiskQuota } from './disk-quota.js'
import { EngineError, transient } from './engine-error.js'
import type { EngineFailure, SandboxDetails, SandboxSpec, ExtraStorage } from './engine-types.js'
import { SANDBOX_CREATE_TIMEOUT, SANDBOX_FAILED } from './errors.js'
import type { ExtraMounts } from './extra-mounts.js'
import { createdAtOf } from './names.js'
import type { SandboxNetwork } from './network.js'
import { loadBinding, recordCreated, type PoolClaim } from './pool-claim.js'
import type { Readiness } from './readiness.js'
import type { Reaper } from './reaper.js'
import { buildSandboxSpec, configDrift } from './sandbox-spec.js'
import { managedNames } from './env.js'
import type { Transitions } from './transitions.js'
import type { EnsureHook, EnsureOptions, SandboxInfo, SandboxStatus } from './types.js'

/*
 * ensure() (docs/contract.md#creation): per-chat single flight, create or start (recreating a stopped
 * container whose settings drifted), 409 adoption, capacity, the ready probe, outputs ownership,
 * meta.json, then the onEnsure hooks once the lock is released (a hook may use the sandbox); status()
 * and remove().
 */

/** How long a name taken by a create still in flight in the engine may stay invisible. */
const ADOPT_WAIT_MS = 15_000

type Ensured = { info: SandboxInfo, started: boolean }
type Container = { id: string, labels: Record<string, string>, running: boolean }

/**
 * The container that holds the sandbox's name. Right after a create that the engine finished after
 * our request gave up, the name is taken before the container can be inspected: wait for it (issue
 * #11: this answered "internal error" under load); a name that stays taken by nothing is a busy engine.
 */
export async function adoptable (base: Pick<CoreBase, 'engine' | 'clock'>, entry: Entry): Promise<SandboxDetails> {
  const until = base.clock.real() + ADOPT_WAIT_MS
  while (true) {
    const existing = await base.engine.inspect(entry.names.container)
    if (existing !== null) return existing
    if (base.clock.real() >= until) throw new EngineError(`sandbox ${entry.names.container}: the name is taken but the sandbox is not visible yet`, { statusCode: 409, busy: true, reason: 'conflict' })
    await sleep(250)
  }
}

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
}

export function createLifecycle (base: Pick<CoreBase, 'engine' | 'log' | 'opts' | 'clock' | 'status'>, chats: Chats, d: LifecycleDeps): Lifecycle {
  const { engine, log, clock } = base
  const { activity, addresses, agents, boot, network, mounts, quota, readiness, poolClaim, reaper, transitions } = d
  const hooks: EnsureHook[] = []

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
      const [ids] = await Promise.all([claimed !== null ? claimed.ids : readiness.waitReady(entry), started ? addresses.learnAddress(entry, container.id) : undefined])
      entry.state = 'running'
      entry.recoverable = false
      entry.startedAt = clock.real()
      chats.changed(entry)
      await readiness.fixOwnership(names.chatId, ids)
      await activity.saveMeta(entry, user, true)
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

  /**
   * Wakes a sandbox the idle reaper paused: one unpause, then it is the same running sandbox (its
   * processes, address and agent go on). Null when it is not paused any more (stopped or removed behind
   * our back): the caller then inspects and starts it as for any other start.
   */
  async function wake (entry: Entry): Promise<Ensured | null> {
    const t0 = clock.real()
    try {
      await engine.unpause(entry.sandboxId as string)
    } catch (err) {
      if (transient(err)) throw mapError(base, err)
      log.info({ chat: entry.names.key, err }, 'a paused sandbox could not be woken; starting it again')
      entry.state = 'unknown'
      chats.changed(entry)
      return null
    }
    entry.state = 'running'
    chats.changed(entry)
    activity.activity(entry)
    log.info({ chat: entry.names.key, pausedS: Math.round((clock.now() - entry.pausedAt) / 1000), ms: Math.round(clock.real() - t0) }, 'sandbox woken')
    return { info: infoOf(entry), started: false }
  }

  /**
   * A stopped container: started as it is, or removed (null: create a new one, volume and data kept)
   * when its settings drifted, it is too old, or it does not start.
   */
  async function startStopped (entry: Entry, existing: SandboxDetails, user: RequestUser | undefined, extra: ExtraStorage[]): Promise<Container | null> {
    const { names } = entry
    const settings = quota.settingsWithQuota()
    const desired = buildSandboxSpec(settings, names.chatId, user, new Date(clock.now()), extra, names.volume)
    const currentImage = await engine.imageId(base.opts.image).catch(() => null)
    const drift = configDrift(existing, desired, currentImage, managedNames(settings.envContributors))
    if (drift !== null || tooOld(base, createdAtOf(existing.labels))) {
      log.info({ chat: names.key, reason: drift ?? 'max age reached' }, 'recreating the stopped sandbox (volume and data kept)')
      await engine.remove(existing.id)
      return null
    }
    await reaper.reserveSlot(entry)
    try {
      await engine.start(existing.id)
      return existing
    } catch (err) {
      // An engine that is gone or busy said nothing about the container: never remove it for that.
      if (transient(err)) throw err
      log.warn({ chat: names.key, err }, 'starting the stopped sandbox failed; recreating it (volume and data kept)')
      await engine.remove(existing.id)
      return null
    }
  }

  /** Creates and starts the container; a 409 means someone else made it: adopt, never remove. */
  async function create (entry: Entry, user: RequestUser | undefined, extra: ExtraStorage[]): Promise<Container> {
    const build = (): SandboxSpec => buildSandboxSpec(quota.settingsWithQuota(), entry.names.chatId, user, new Date(clock.now()), extra, entry.names.volume)
    let config = build()
    // The chat's identity is in its record before the sandbox exists: re-adoption reads it (sandbox-identity.ts).
    await recordCreated(base.opts, entry)
    let created
    try {
      created = await createOnce(config)
      if (config.limits.disk > 0) quota.quotaOutcome(true)
    } catch (err) {
      if (config.limits.disk === 0 || !isQuotaRefusal(err)) throw err
      // The storage driver has no quota after all: remember it and create without one.
      quota.quotaOutcome(false, err)
      config = build()
      created = await createOnce(config)
    }
    if (created === 'conflict') {
      const existing = await adoptable(base, entry)
      log.info({ chat: entry.names.key }, 'sandbox name conflict: adopting the existing container')
      if (!existing.running) await engine.start(existing.id)
      return existing
    }
    try {
      await engine.start(created.id)
    } catch (err) {
      // Busy or gone: the created container stays, the next ensure() starts it.
      if (transient(err)) throw err
      log.error({ chat: entry.names.key, err }, 'a new sandbox did not start; removing it')
      await engine.remove(created.id).catch(() => {})
      throw new SANDBOX_FAILED('see the server log')
    }
    log.info({ chat: entry.names.key, container: entry.names.container }, 'sandbox created')
    return { id: created.id, labels: config.labels, running: true }
  }

  async function createOnce (config: SandboxSpec): Promise<{ id: string } | 'conflict'> {
    try {
      return await engine.create(config)
    } catch (err) {
      const e = err as EngineFailure
      if (e.reason === 'image-missing') throw imageMissing(base)
      if (e.reason === 'network-missing' && base.opts.enableNetwork) {
        // The network was removed behind our back: recreate it once.
        await network.prepareNetwork()
        return await engine.create(config)
      }
      throw err
    }
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

  return { ensure, status: statusOf, remove, addHook: hook => { hooks.push(hook) } }
}
