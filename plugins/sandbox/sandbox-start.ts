import type { RequestUser } from '../../core/identity.js'
import type { Activity } from './activity.js'
import { infoOf, type Chats, type Entry } from './chats.js'
import { sleep } from './clock.js'
import { imageMissing, mapError, tooOld, type CoreBase } from './context.js'
import { isQuotaRefusal, type DiskQuota } from './disk-quota.js'
import { EngineError, transient } from './engine-error.js'
import type { EngineFailure, ExtraStorage, SandboxDetails, SandboxSpec } from './engine-types.js'
import { managedNames } from './env.js'
import { SANDBOX_FAILED } from './errors.js'
import { createdAtOf } from './names.js'
import type { SandboxNetwork } from './network.js'
import { recordCreated } from './pool-claim.js'
import type { Reaper } from './reaper.js'
import { buildSandboxSpec, configDrift } from './sandbox-spec.js'
import type { SandboxInfo } from './types.js'

/*
 * Bringing one chat's sandbox to running, the steps ensure() (lifecycle.ts) chooses between: wake a paused
 * sandbox, start a stopped one (or remove it when its settings drifted, it is too old or it does not start),
 * create a new one (the chat's record first; a quota the storage driver refuses dropped once; a name taken
 * by someone else's create adopted, never removed). Each runs under the chat's lock that ensure() holds.
 */

/** How long a name taken by a create still in flight in the engine may stay invisible. */
const ADOPT_WAIT_MS = 15_000

/** What bringing a sandbox to running answers: its info, and whether it was (re)started or created. */
export type Ensured = { info: SandboxInfo, started: boolean }
/** A sandbox the start path found, started or created. */
export type Container = { id: string, labels: Record<string, string>, running: boolean }

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

/** What the start path builds on. */
export interface StarterDeps {
  activity: Pick<Activity, 'activity'>
  network: Pick<SandboxNetwork, 'prepareNetwork'>
  quota: Pick<DiskQuota, 'settingsWithQuota' | 'quotaOutcome'>
  reaper: Pick<Reaper, 'reserveSlot'>
}

/** Waking, starting and creating a chat's sandbox (under its lock). */
export interface Starter {
  wake: (entry: Entry) => Promise<Ensured | null>
  startStopped: (entry: Entry, existing: SandboxDetails, user: RequestUser | undefined, extra: ExtraStorage[]) => Promise<Container | null>
  create: (entry: Entry, user: RequestUser | undefined, extra: ExtraStorage[]) => Promise<Container>
}

export function createStarter (base: Pick<CoreBase, 'engine' | 'log' | 'opts' | 'clock' | 'status'>, chats: Pick<Chats, 'changed'>, d: StarterDeps): Starter {
  const { engine, log, clock } = base
  const { activity, network, quota, reaper } = d

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

  return { wake, startStopped, create }
}
