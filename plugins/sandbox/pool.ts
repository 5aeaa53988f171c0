import { randomBytes } from 'node:crypto'
import { normalizeChatId } from '../../core/chat-id.js'
import { buildSandboxSpec, configDrift, sandboxEnvList } from './sandbox-spec.js'
import type { DiskQuota } from './disk-quota.js'
import type { SandboxDetails, SandboxSpec, SandboxSummary } from './engine-types.js'
import { managedNames } from './env.js'
import type { Readiness } from './readiness.js'
import type { Agents } from './agent-client.js'
import { dropAgent, newAgentState, type AgentState } from './agent-connection.js'
import { createdAtOf, creationLabels, ownerLabels, SANDBOX_HOSTNAME } from './names.js'
import { asBinding, JOURNAL, readState, RECORD, SLOT } from './pool-record.js'
import type { Chats, Entry } from './chats.js'
import { sleep } from './clock.js'
import { tooOld, type CoreBase } from './context.js'

/*
 * The warm pool (docs/contract.md#warm-pool, SANDBOX_POOL_SIZE): started, ready sandboxes that belong to no chat yet, named
 * `{prefix}-pool-{slot}`, each with its own home volume `{prefix}-home-{slot}` and data areas (the storage
 * request's `data: { slot }`, kept by chat-storage: prepareSlot, adoptSlot, purgeSlot). They carry nothing pool-specific but that name (labels,
 * hostname and volume name have a created sandbox's form), so a claimed one, renamed to its chat's
 * name, looks like a created one. A new chat claims one (pool-claim.ts); this file creates them (one at
 * a time, within MAX_RUNNING_SANDBOXES headroom, paused while the engine is unreachable or chats are
 * starting), replaces the ones that drifted, and re-adopts them at boot. See the README.
 */

/** Labels of earlier versions: a pool sandbox's slot, a recreated claimed sandbox's home volume. */
export const POOL_LABEL = 'cu.pool-slot'
export const HOME_LABEL = 'cu.home-volume'
const RETRY_MIN_MS = 2000
const RETRY_MAX_MS = 60_000

export interface PoolSlot {
  slot: string
  id: string
  /** the engine's view at creation (claimability: configDrift against the current settings) */
  details: SandboxDetails
  uid: number
  gid: number
  /** its agent connection, opened as soon as it is ready so that a claim finds it open (handed to the chat) */
  agent?: AgentState
}

export interface PoolState {
  /** ready, unclaimed sandboxes (oldest first) */
  readonly ready: PoolSlot[]
  /** the slot of the create in flight (at most one), or null */
  creating: string | null
  filling: Promise<void> | null
  /** claimed containers still running with the pool's env: container id → chat (pool-claim.ts chatExecEnv) */
  readonly bound: Map<string, Entry>
  /** container ids being claimed right now (out of `ready`, still named pool-…) */
  readonly claiming: Set<string>
  /** no create before this time (set after a claim: the new chat's first command goes first) */
  quietUntil: number
  /** after a failed create: no new attempt before this time */
  retryAt: number
  retryMs: number
  /** holds on creates (holdPool: plugins still loading) */
  held: number
}

/** A slot's names; its volume has a chat's form (`{prefix}-home-{32 hex}`; `-home-pool-` for earlier 12-hex slots). */
export const poolNames = (prefix: string, slot: string): { container: string, volume: string, hostname: string } =>
  ({ container: `${prefix}-pool-${slot}`, volume: slot.length === 12 ? `${prefix}-home-pool-${slot}` : `${prefix}-home-${slot}`, hostname: SANDBOX_HOSTNAME })

/** What the pool builds on. */
export interface PoolDeps {
  readiness: Pick<Readiness, 'probePoolSandbox'>
  agents: Pick<Agents, 'openAgent'>
  quota: Pick<DiskQuota, 'settingsWithQuota'>
}

/** The warm pool: its state and what lifecycle, the claim, the reaper and boot do with it. */
export interface Pool {
  readonly state: PoolState
  slotOf: (c: SandboxSummary) => string | null
  claimable: (p: PoolSlot, imageId: string | null) => string | null
  refill: () => void
  /** Holds creates until the returned release is called (once); the release refills. */
  holdPool: () => () => void
  discardSlot: (s: PoolSlot) => Promise<void>
  drainPool: () => Promise<void>
  takeSlot: () => PoolSlot | undefined
  yieldSlot: () => Promise<boolean>
  maintain: (unclaimed: SandboxSummary[]) => Promise<void>
}

export function createPool (base: Pick<CoreBase, 'engine' | 'log' | 'opts' | 'clock' | 'status'>, chats: Chats, d: PoolDeps): Pool {
  const { engine, log, clock, status } = base
  const { readiness, agents, quota } = d
  const state: PoolState = { ready: [], bound: new Map(), claiming: new Set(), creating: null, filling: null, quietUntil: 0, retryAt: 0, retryMs: RETRY_MIN_MS, held: 0 }

  /** The slot of an unclaimed pool sandbox (by its name; earlier versions also labelled it), or null. */
  function slotOf (c: SandboxSummary): string | null {
    const slot = c.labels[POOL_LABEL] ?? c.name.slice(`${base.opts.prefix}-pool-`.length)
    return SLOT.test(slot) && c.name === poolNames(base.opts.prefix, slot).container ? slot : null
  }

  /**
   * The create body of a pool sandbox: exactly a chat's (buildSandboxSpec: image, limits, network,
   * tmpfs, quota, config-derived env, skills, hostname) with the slot's name, volume and
   * data areas, no per-chat env (CHAT_ID, git/GitLab identity: given per exec after a claim) and no chat labels.
   */
  function poolConfig (slot: string, now: Date): SandboxSpec {
    const s = quota.settingsWithQuota()
    const n = poolNames(s.prefix, slot)
    const spec = buildSandboxSpec(s, 'pool', undefined, now, [], n.volume)
    const labels = ownerLabels(s.prefix)
    return {
      ...spec,
      name: n.container,
      env: sandboxEnvList(s),
      labels: { ...labels, ...creationLabels(s.image, now) },
      storage: { ...spec.storage, home: { volume: n.volume, labels }, data: { slot } }
    }
  }

  /** Whether a ready slot still matches what a new sandbox would be (image, limits, network, env, mounts, age). */
  function claimable (p: PoolSlot, imageId: string | null): string | null {
    if (tooOld(base, createdAtOf(p.details.labels))) return 'max age reached'
    return configDrift(p.details, poolConfig(p.slot, new Date(clock.now())), imageId, managedNames(quota.settingsWithQuota().envContributors))
  }

  /** Chat sandboxes plus pool sandboxes counted against MAX_RUNNING_SANDBOXES. */
  function poolRunning (): number {
    const p = state
    return p.ready.length + (p.creating !== null ? 1 : 0)
  }

  function chatsRunning (): number {
    let n = 0
    for (const e of chats.entries.values()) if (e.state === 'running') n++
    for (const e of chats.starting) if (e.state !== 'running') n++
    return n
  }

  /** Room for one more pool sandbox: below the pool size and within MAX_RUNNING_SANDBOXES headroom. */
  function wanted (): boolean {
    if (base.opts.poolSize <= 0 || status.closed || !status.bootstrapped || status.engineUp === false || state.held > 0) return false
    if (poolRunning() >= base.opts.poolSize) return false
    return base.opts.maxRunning === 0 || chatsRunning() + poolRunning() < base.opts.maxRunning
  }

  /** Holds creates until the release is called (once), then refills. */
  function holdPool (): () => void {
    state.held++
    let released = false
    return () => {
      if (released) return
      released = true
      state.held--
      refill()
    }
  }

  /** Refill in the background: one create at a time, deferred while chats are starting, backing off after failures. */
  function refill (): void {
    const p = state
    if (p.filling !== null || !wanted()) return
    p.filling = (async () => {
      while (wanted()) {
        const wait = Math.max(p.retryAt, p.quietUntil) - clock.real()
        if (chats.starting.size > 0 || wait > 0) { await sleep(chats.starting.size > 0 ? 200 : Math.min(wait, 5000)); continue }
        try {
          await createSlot(p)
          p.retryMs = RETRY_MIN_MS
        } catch (err) {
          p.retryAt = clock.real() + p.retryMs
          p.retryMs = Math.min(RETRY_MAX_MS, p.retryMs * 2)
          log.warn({ err, retryInMs: p.retryAt - clock.real() }, 'warm pool: creating a sandbox failed')
          if (status.engineUp === false) return
        }
      }
    })().finally(() => { p.filling = null })
  }

  async function createSlot (p: PoolState): Promise<void> {
    const slot = randomBytes(16).toString('hex')
    const { storage } = base.opts
    const config = poolConfig(slot, new Date(clock.now()))
    p.creating = slot
    let id: string | undefined
    try {
      await storage.prepareSlot(slot)
      const created = await engine.create(config)
      if (created === 'conflict') throw new Error('pool sandbox name taken')
      id = created.id
      await engine.start(id)
      const ids = await readiness.probePoolSandbox(id)
      const uid = base.opts.uid > 0 ? base.opts.uid : ids.uid
      const gid = base.opts.gid > 0 ? base.opts.gid : ids.gid
      await storage.prepareSlot(slot, { outputsOwner: { uid, gid } }).catch(() => {})
      const details = await engine.inspect(id)
      if (details?.running !== true) throw new Error('pool sandbox stopped while starting')
      if (status.closed) return
      p.ready.push(warm({ slot, id, details, uid, gid }))
      log.info({ slot, pool: p.ready.length }, 'warm pool: sandbox ready')
    } catch (err) {
      await discard(slot, id ?? config.name)
      throw err
    } finally { p.creating = null }
  }

  /** Opens the ready slot's agent in the background (python's start is most of a claim's wait otherwise: docs/performance.md). */
  function warm (s: PoolSlot): PoolSlot {
    s.agent = newAgentState(s.id, `pool-${s.slot}`)
    void agents.openAgent(s.agent).catch(() => {})
    return s
  }

  /** Removes a ready slot that no chat claimed, with its agent connection. */
  async function discardSlot (s: PoolSlot): Promise<void> {
    dropAgent(s.agent)
    await discard(s.slot, s.id)
  }

  /** Removes a pool sandbox that no chat claimed: container, home volume and data dirs. */
  async function discard (slot: string, idOrName: string): Promise<void> {
    try {
      await engine.remove(idOrName)
      await engine.removeVolume(poolNames(base.opts.prefix, slot).volume)
      await base.opts.storage.purgeSlot(slot)
    } catch (err) {
      log.warn({ slot, err }, 'warm pool: removing an unclaimed sandbox failed (retried at the next pass)')
    }
  }

  /** On close: the create in flight ends first (≤ 30 s), so nothing appears after the server stopped; it is re-adopted next boot. */
  async function drainPool (): Promise<void> {
    const filling = state.filling
    if (filling === null) return
    let timer: NodeJS.Timeout | undefined
    await Promise.race([filling, new Promise(resolve => { timer = setTimeout(resolve, 30_000) })])
    clearTimeout(timer)
  }

  /** Takes one ready slot out of the pool (synchronous: two claims can never take the same one). */
  function takeSlot (): PoolSlot | undefined {
    return state.ready.shift()
  }

  /** MAX_RUNNING_SANDBOXES reached: a pool sandbox gives way before any chat's sandbox is stopped. True when one was removed. */
  async function yieldSlot (): Promise<boolean> {
    const p = takeSlot()
    if (p === undefined) return false
    log.info({ slot: p.slot }, 'warm pool: sandbox capacity reached; an unclaimed sandbox gives way')
    await discardSlot(p)
    return true
  }

  /**
   * A reaper pass (and boot): pool sandboxes that stopped, vanished, drifted (image, settings) or
   * reached their max age are removed; unknown unclaimed ones (re-adopted at boot) join the pool; then refill.
   */
  async function maintain (unclaimed: SandboxSummary[]): Promise<void> {
    const p = state
    const listed = new Map(unclaimed.map(c => [c.id, c]))
    const imageId = await engine.imageId(base.opts.image).catch(() => null)
    for (const slot of [...p.ready]) {
      const c = listed.get(slot.id)
      const why = c === undefined ? 'gone' : !c.running ? 'stopped' : claimable(slot, imageId)
      if (why === null) continue
      p.ready.splice(p.ready.indexOf(slot), 1)
      log.info({ slot: slot.slot, reason: why }, 'warm pool: replacing a sandbox')
      await discardSlot(slot)
    }
    const known = new Set(p.ready.map(s => s.id))
    for (const c of unclaimed) {
      const slot = slotOf(c)
      // Only the slot being created is left alone: a refill running beside the boot's pass (the pool is
      // released once every plugin is ready) must not keep the other slots from their re-adoption or rollback.
      if (slot === null || known.has(c.id) || p.claiming.has(c.id) || slot === p.creating) continue
      await rollbackJournal(slot)
      await adoptSlot(p, slot, c, imageId)
    }
    refill()
  }

  /**
   * A claim journal left by a server that stopped before the engine's claim (pool-claim.ts writes the
   * journal, then the chat's record, then claims): the sandbox is still unclaimed and its dirs untouched,
   * so the claim is rolled back (the chat's record removed when it names this slot).
   */
  async function rollbackJournal (slot: string): Promise<void> {
    const { storage } = base.opts
    const journal = storage.slotState(slot)
    const written = await readState(journal, JOURNAL)
    if (written === null) return
    const chatId = written.chat_id
    if (typeof chatId === 'string' && normalizeChatId(chatId) === chatId) {
      const state = storage.chatState(chatId)
      if (asBinding(await readState(state, RECORD))?.slot === slot) await state.remove(RECORD)
    }
    await journal.remove(JOURNAL)
    log.warn({ slot }, 'warm pool: rolled back a claim interrupted before the engine claimed the sandbox')
  }

  async function adoptSlot (p: PoolState, slot: string, c: SandboxSummary, imageId: string | null): Promise<void> {
    const details = c.running ? await engine.inspect(c.id).catch(() => null) : null
    const candidate = details === null ? null : { slot, id: c.id, details, uid: base.opts.uid, gid: base.opts.gid }
    if (candidate === null || claimable(candidate, imageId) !== null || p.ready.length >= base.opts.poolSize) {
      log.info({ slot }, 'warm pool: removing a stale unclaimed sandbox')
      await discard(slot, c.id)
      return
    }
    p.ready.push(warm(candidate))
    log.info({ slot }, 'warm pool: re-adopted an unclaimed sandbox')
  }

  return { state, slotOf, claimable, refill, holdPool, discardSlot, drainPool, takeSlot, yieldSlot, maintain }
}
