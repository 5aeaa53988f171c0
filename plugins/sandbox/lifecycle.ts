import { chatPaths } from '../../core/chat-paths.js'
import type { RequestUser } from '../../core/identity.js'
import { activity, metaUserChanged, saveMeta } from './activity.js'
import { addressOn, dropAddress, learnAddress, publishAddress } from './addresses.js'
import { agentOf, openAgent } from './agent-client.js'
import { bootstrap } from './boot.js'
import { prepareNetwork } from './network.js'
import { buildSandboxSpec, configDrift } from './sandbox-spec.js'
import { exists, prepareChatDirs, removeChatDir } from './data-dirs.js'
import { extraMounts } from './extra-mounts.js'
import { isQuotaRefusal, quotaOutcome, settingsWithQuota } from './disk-quota.js'
import { EngineError, transient } from './engine-error.js'
import type { EngineFailure, SandboxDetails, SandboxSpec, SpecMount } from './engine-types.js'
import { SANDBOX_CREATE_TIMEOUT, SANDBOX_FAILED } from './errors.js'
import { fixOwnership, waitReady } from './readiness.js'
import { claim, loadBinding, recordCreated } from './pool-claim.js'
import { createdAtOf } from './names.js'
import { reserveSlot } from './reaper.js'
import { changed, engineUnavailable, entryOf, imageMissing, infoOf, mapError, notifyStop, sleep, tooOld, withLock, type Entry, type Registry } from './registry.js'
import type { EnsureOptions, SandboxInfo, SandboxStatus } from './types.js'

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

export async function ensure (reg: Registry, chatId: string, opts: EnsureOptions = {}): Promise<SandboxInfo> {
  if (reg.closed) throw engineUnavailable(reg)
  const entry = entryOf(reg, chatId)
  if (opts.user !== undefined) entry.user = opts.user
  activity(reg, entry)
  // Fast path: known running and nobody is changing it; no Docker call at all.
  if (entry.state === 'running' && entry.sandboxId !== undefined && entry.locked === 0 && !entry.stopping) {
    const info = infoOf(entry)
    if (opts.user !== undefined && metaUserChanged(entry, opts.user)) void saveMeta(reg, entry, opts.user).catch(() => {})
    await runHooks(reg, info, false, opts.user)
    return info
  }
  if (entry.ensuring === null) {
    // Hooks run after the lock is released, so a hook may itself call ensure(), exec() or putFile().
    const op = withLock(entry, async () => await doEnsure(reg, entry, opts.user)).then(async result => {
      await runHooks(reg, result.info, result.started, opts.user)
      return result
    })
    entry.ensuring = op
    op.then(() => {}, () => {}).finally(() => { if (entry.ensuring === op) entry.ensuring = null })
  }
  const op = entry.ensuring
  const timeoutMs = opts.timeoutMs ?? reg.opts.createTimeoutS * 1000
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new SANDBOX_CREATE_TIMEOUT(Math.max(1, Math.round(timeoutMs / 1000)))), timeoutMs)
  })
  try {
    const { info } = await Promise.race([op, timeout])
    return info
  } finally { clearTimeout(timer) }
}

async function doEnsure (reg: Registry, entry: Entry, user: RequestUser | undefined): Promise<Ensured> {
  try {
    await bootstrap(reg)
  } catch (err) {
    throw mapError(reg, err)
  }
  const { names } = entry
  try {
    const paths = await prepareChatDirs(reg.opts.dataDir, names.chatId)
    // A chat that claimed a pool sandbox once keeps its home volume (pool-claim.ts) through every recreation.
    await loadBinding(reg, entry)
    const existing = await reg.engine.inspect(names.container)
    let container: Container | null = existing
    let started = false
    const extra = existing === null || !existing.running ? await extraMounts(reg, entry, user) : []
    if (existing !== null && !existing.running) {
      container = await startStopped(reg, entry, existing, user, extra)
      started = container !== null
    }
    // A new chat takes a started, ready sandbox from the warm pool when one matches (pool-claim.ts).
    const claimed = existing === null ? await claim(reg, entry, user, extra) : null
    if (claimed !== null) { container = claimed.container; started = true }
    if (container === null) {
      await reserveSlot(reg, entry)
      container = await create(reg, entry, user, extra)
      started = true
    }
    entry.sandboxId = container.id
    entry.createdAt = createdAtOf(container.labels)
    // A started sandbox's agent opens now: its exec and python's start (~0.1 s idle, seconds under load)
    // overlap the ready probe, ownership, meta.json and the hooks (bench/profile-first-call.ts). A claimed
    // pool sandbox brings its open one (pool-claim.ts).
    if (started) void openAgent(reg, agentOf(entry, container.id)).catch(() => {})
    // The address this start gave (a restarted sandbox may get another chat's old one) is published
    // before ensure() resolves, so the egress proxy knows the chat from its first command (addresses.ts).
    if (!started && existing !== null) publishAddress(reg, entry, addressOn(reg, existing))
    const [ids] = await Promise.all([claimed !== null ? claimed.ids : waitReady(reg, entry), started ? learnAddress(reg, entry, container.id) : undefined])
    entry.state = 'running'
    entry.recoverable = false
    entry.startedAt = Date.now()
    changed(reg, entry)
    await fixOwnership(reg, paths, ids)
    await saveMeta(reg, entry, user, true)
    const info = infoOf(entry)
    activity(reg, entry)
    return { info, started }
  } catch (err) {
    if (entry.state !== 'running') { entry.state = 'unknown'; changed(reg, entry) }
    throw mapError(reg, err)
  } finally {
    reg.starting.delete(entry)
  }
}

/**
 * A stopped container: started as it is, or removed (null: create a new one, volume and data kept)
 * when its settings drifted, it is too old, or it does not start.
 */
async function startStopped (reg: Registry, entry: Entry, existing: SandboxDetails, user: RequestUser | undefined, extra: SpecMount[]): Promise<Container | null> {
  const { names } = entry
  const desired = buildSandboxSpec(settingsWithQuota(reg), names.chatId, user, new Date(reg.opts.now()), extra, names.volume)
  const currentImage = await reg.engine.imageId(reg.opts.image).catch(() => null)
  const drift = configDrift(existing, desired, currentImage)
  if (drift !== null || tooOld(reg, createdAtOf(existing.labels))) {
    reg.log.info({ chat: names.key, reason: drift ?? 'max age reached' }, 'recreating the stopped sandbox (volume and data kept)')
    await reg.engine.remove(existing.id)
    return null
  }
  await reserveSlot(reg, entry)
  try {
    await reg.engine.start(existing.id)
    return existing
  } catch (err) {
    // An engine that is gone or busy said nothing about the container: never remove it for that.
    if (transient(err)) throw err
    reg.log.warn({ chat: names.key, err }, 'starting the stopped sandbox failed; recreating it (volume and data kept)')
    await reg.engine.remove(existing.id)
    return null
  }
}

/** Creates and starts the container; a 409 means someone else made it: adopt, never remove. */
async function create (reg: Registry, entry: Entry, user: RequestUser | undefined, extra: SpecMount[]): Promise<Container> {
  const build = (): SandboxSpec => buildSandboxSpec(settingsWithQuota(reg), entry.names.chatId, user, new Date(reg.opts.now()), extra, entry.names.volume)
  let config = build()
  // The chat's identity is in its record before the sandbox exists: re-adoption reads it (sandbox-identity.ts).
  await recordCreated(reg, entry)
  let created
  try {
    created = await createOnce(reg, config)
    if (config.limits.disk > 0) quotaOutcome(reg, true)
  } catch (err) {
    if (config.limits.disk === 0 || !isQuotaRefusal(err)) throw err
    // The storage driver has no quota after all: remember it and create without one.
    quotaOutcome(reg, false, err)
    config = build()
    created = await createOnce(reg, config)
  }
  if (created === 'conflict') {
    const existing = await adoptable(reg, entry)
    reg.log.info({ chat: entry.names.key }, 'sandbox name conflict: adopting the existing container')
    if (!existing.running) await reg.engine.start(existing.id)
    return existing
  }
  try {
    await reg.engine.start(created.id)
  } catch (err) {
    // Busy or gone: the created container stays, the next ensure() starts it.
    if (transient(err)) throw err
    reg.log.error({ chat: entry.names.key, err }, 'a new sandbox did not start; removing it')
    await reg.engine.remove(created.id).catch(() => {})
    throw new SANDBOX_FAILED('see the server log')
  }
  reg.log.info({ chat: entry.names.key, container: entry.names.container }, 'sandbox created')
  return { id: created.id, labels: config.labels, running: true }
}

/**
 * The container that holds the sandbox's name. Right after a create that the engine finished after
 * our request gave up, the name is taken before the container can be inspected: wait for it (issue
 * #11: this answered "internal error" under load); a name that stays taken by nothing is a busy engine.
 */
export async function adoptable (reg: Registry, entry: Entry): Promise<SandboxDetails> {
  const until = Date.now() + ADOPT_WAIT_MS
  while (true) {
    const existing = await reg.engine.inspect(entry.names.container)
    if (existing !== null) return existing
    if (Date.now() >= until) throw new EngineError(`sandbox ${entry.names.container}: the name is taken but the sandbox is not visible yet`, { statusCode: 409, busy: true, reason: 'conflict' })
    await sleep(250)
  }
}

async function createOnce (reg: Registry, config: SandboxSpec): Promise<{ id: string } | 'conflict'> {
  try {
    return await reg.engine.create(config)
  } catch (err) {
    const e = err as EngineFailure
    if (e.reason === 'image-missing') throw imageMissing(reg)
    if (e.reason === 'network-missing' && reg.opts.enableNetwork) {
      // The network was removed behind our back: recreate it once.
      await prepareNetwork(reg)
      return await reg.engine.create(config)
    }
    throw err
  }
}

async function runHooks (reg: Registry, info: SandboxInfo, started: boolean, user: RequestUser | undefined): Promise<void> {
  for (const hook of reg.hooks) {
    try {
      await hook(info, { started, user })
    } catch (err) {
      reg.log.warn({ chat: info.chatKey, err }, 'an onEnsure hook failed')
    }
  }
}

/** Never creates or starts anything; refreshes the cached state unless an ensure is in flight. */
export async function status (reg: Registry, chatId: string): Promise<SandboxStatus> {
  const entry = entryOf(reg, chatId)
  const metaExists = await exists(chatPaths(reg.opts.dataDir, chatId).meta)
  let c
  try {
    c = await reg.engine.inspect(entry.names.container)
  } catch (err) { throw mapError(reg, err) }
  if (entry.locked === 0 && entry.ensuring === null) {
    // A container we did not know about counts as discovered now (like re-adoption), not as idle since ever.
    if (c?.running === true && entry.state !== 'running') entry.lastActive = Math.max(entry.lastActive, reg.opts.now())
    entry.state = c === null ? 'absent' : c.running ? 'running' : 'stopped'
    if (c !== null) { entry.sandboxId = c.id; entry.createdAt = createdAtOf(c.labels) }
    if (c?.running !== true) dropAddress(reg, entry)
    changed(reg, entry)
  }
  if (c === null) return { state: 'absent', metaExists }
  return { state: c.running ? 'running' : 'stopped', metaExists, sandboxId: c.id }
}

/** Removes the container under the chat's lock; `purge` also deletes the volume and the data dir. */
export async function remove (reg: Registry, chatId: string, opts: { purge?: boolean } = {}): Promise<void> {
  const entry = entryOf(reg, chatId)
  await withLock(entry, async () => {
    try {
      await loadBinding(reg, entry)
      await reg.engine.remove(entry.names.container)
      entry.state = 'absent'
      entry.sandboxId = undefined
      entry.recoverable = false
      changed(reg, entry)
      if (opts.purge === true) {
        await reg.engine.removeVolume(entry.names.volume)
        await removeChatDir(reg.opts.dataDir, entry.names.key)
        entry.meta = undefined
        entry.metaLoaded = false
      }
    } catch (err) { throw mapError(reg, err) }
  })
  notifyStop(reg, entry, opts.purge === true ? 'purged' : 'removed')
}
