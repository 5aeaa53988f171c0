import { randomBytes } from 'node:crypto'
import { buildSandboxSpec, configDrift, sandboxEnvList } from './sandbox-spec.js'
import type { DiskQuota } from './disk-quota.js'
import type { SandboxSpec, SandboxSummary } from './engine-types.js'
import { managedNames } from './env.js'
import type { Readiness } from './readiness.js'
import type { Agents } from './agent-client.js'
import { dropAgent, newAgentState } from './agent-connection.js'
import { createdAtOf, creationLabels, ownerLabels } from './names.js'
import { SLOT } from './pool-record.js'
import { POOL_LABEL, poolNames, type PoolSlot, type PoolState } from './pool-slots.js'
import { createPoolUpkeep } from './pool-upkeep.js'
import type { Chats } from './chats.js'
import { sleep } from './clock.js'
import { tooOld, type CoreBase } from './context.js'

/*
 * The warm pool (docs/contract.md#warm-pool, SANDBOX_POOL_SIZE): started, ready sandboxes that belong to no chat yet, named
 * `{prefix}-pool-{slot}`, each with its own home volume `{prefix}-home-{slot}` and data areas (the storage
 * request's `data: { slot }`, kept by chat-storage: prepareSlot, adoptSlot, purgeSlot). They carry nothing pool-specific but that name (labels,
 * hostname and volume name have a created sandbox's form), so a claimed one, renamed to its chat's
 * name, looks like a created one. A new chat claims one (pool-claim.ts); this file creates them (one at
 * a time, within MAX_RUNNING_SANDBOXES headroom, paused while the engine is unreachable or chats are
 * starting); pool-upkeep.ts replaces the ones that drifted and re-adopts them at boot. See the README.
 */

export { HOME_LABEL, POOL_LABEL, poolNames, type PoolSlot, type PoolState } from './pool-slots.js'

const RETRY_MIN_MS = 2000
const RETRY_MAX_MS = 60_000

/** What the pool builds on. */
export interface PoolDeps {
  readiness: Pick<Readiness, 'probePoolSandbox' | 'fixOwnership'>
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
  /** The engine saw sandbox `id` end (SandboxEngine.watchSandboxes): a ready slot of it is replaced at once. */
  ended: (id: string) => void
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
      await readiness.fixOwnership({ slot }, { uid, gid }).catch(() => {})
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

  const { maintain } = createPoolUpkeep(base, state, { slotOf, claimable, discard, discardSlot, warm, refill })

  /**
   * A ready slot whose sandbox ended outside the server (its pod deleted or evicted): out of the pool before a
   * chat claims it, removed (record, volume, areas) and replaced, without waiting for the reaper's pass.
   */
  function ended (id: string): void {
    const s = state.ready.find(r => r.id === id)
    if (s === undefined) return
    state.ready.splice(state.ready.indexOf(s), 1)
    log.info({ slot: s.slot }, 'warm pool: a ready sandbox ended outside the server; replacing it')
    void discardSlot(s).finally(() => { refill() })
  }

  return { state, slotOf, claimable, refill, holdPool, discardSlot, drainPool, takeSlot, yieldSlot, maintain, ended }
}
