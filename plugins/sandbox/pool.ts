import { randomBytes } from 'node:crypto'
import { chmod, chown, mkdir, readFile, rm } from 'node:fs/promises'
import { normalizeChatId } from '../../core/chat-id.js'
import { chatPaths } from '../../core/chat-paths.js'
import { join } from 'node:path'
import { buildSandboxSpec, configDrift, proxyEnv } from './sandbox-spec.js'
import { settingsWithQuota } from './disk-quota.js'
import type { SandboxDetails, SandboxSpec, SandboxSummary } from './engine-types.js'
import { containerEnvList } from './env.js'
import { probePoolSandbox } from './readiness.js'
import { dropAgent, newAgentState, openAgent, type AgentState } from './agent-client.js'
import { createdAtOf, creationLabels, ownerLabels, SANDBOX_HOSTNAME } from './names.js'
import { readRecord, RECORD, SLOT } from './pool-record.js'
import { sleep, tooOld, type Entry, type Registry } from './registry.js'

/*
 * The warm pool (docs/contract.md#warm-pool, SANDBOX_POOL_SIZE): started, ready sandboxes that belong to no chat yet, named
 * `{prefix}-pool-{slot}`, each with its own home volume `{prefix}-home-{slot}` and data dirs
 * `{DATA_DIR}/pool/{slot}/{uploads,outputs}`. They carry nothing pool-specific but that name (labels,
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
  /** a create in flight (at most one) */
  creating: boolean
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
}

const states = new WeakMap<Registry, PoolState>()

export function poolOf (reg: Registry): PoolState {
  let p = states.get(reg)
  if (p === undefined) states.set(reg, p = { ready: [], bound: new Map(), claiming: new Set(), creating: false, filling: null, quietUntil: 0, retryAt: 0, retryMs: RETRY_MIN_MS })
  return p
}

/** A slot's names; its volume has a chat's form (`{prefix}-home-{32 hex}`; `-home-pool-` for earlier 12-hex slots). */
export const poolNames = (prefix: string, slot: string): { container: string, volume: string, hostname: string } =>
  ({ container: `${prefix}-pool-${slot}`, volume: slot.length === 12 ? `${prefix}-home-pool-${slot}` : `${prefix}-home-${slot}`, hostname: SANDBOX_HOSTNAME })

/** The slot of an unclaimed pool sandbox (by its name; earlier versions also labelled it), or null. */
export function slotOf (reg: Registry, c: SandboxSummary): string | null {
  const slot = c.labels[POOL_LABEL] ?? c.name.slice(`${reg.opts.prefix}-pool-`.length)
  return SLOT.test(slot) && c.name === poolNames(reg.opts.prefix, slot).container ? slot : null
}

export const slotDirs = (root: string, slot: string): { dir: string, uploads: string, outputs: string, journal: string } => {
  const dir = join(root, 'pool', slot)
  return { dir, uploads: join(dir, 'uploads'), outputs: join(dir, 'outputs'), journal: join(dir, 'claim.json') }
}

/**
 * The create body of a pool sandbox: exactly a chat's (buildSandboxSpec: image, limits, network,
 * tmpfs, quota, config-derived env, mount targets and modes, hostname) with the slot's name, volume and
 * data dirs, no per-chat env (CHAT_ID, git/GitLab identity: given per exec after a claim) and no chat labels.
 */
export function poolConfig (reg: Registry, slot: string, now: Date): SandboxSpec {
  const s = settingsWithQuota(reg)
  const n = poolNames(s.prefix, slot)
  const base = buildSandboxSpec(s, 'pool', undefined, now, [], n.volume)
  const host = slotDirs(s.dataDirHost, slot)
  const labels = ownerLabels(s.prefix)
  const mounts = base.mounts.map(m => {
    if (m.type === 'volume') return { ...m, volumeLabels: labels }
    if (m.target === '/mnt/user-data/uploads') return { ...m, source: host.uploads }
    if (m.target === '/mnt/user-data/outputs') return { ...m, source: host.outputs }
    return m
  })
  return {
    ...base,
    name: n.container,
    env: containerEnvList(s.sandboxEnv, { SUBAGENT_CLI: s.subagentCli }, proxyEnv(s.egressProxy)),
    labels: { ...labels, ...creationLabels(s.image, now) },
    mounts
  }
}

/** Whether a ready slot still matches what a new sandbox would be (image, limits, network, env, mounts, age). */
export function claimable (reg: Registry, p: PoolSlot, imageId: string | null): string | null {
  if (tooOld(reg, createdAtOf(p.details.labels))) return 'max age reached'
  return configDrift(p.details, poolConfig(reg, p.slot, new Date(reg.opts.now())), imageId)
}

/** Chat sandboxes plus pool sandboxes counted against MAX_RUNNING_SANDBOXES. */
export function poolRunning (reg: Registry): number {
  const p = poolOf(reg)
  return p.ready.length + (p.creating ? 1 : 0)
}

function chatsRunning (reg: Registry): number {
  let n = 0
  for (const e of reg.entries.values()) if (e.state === 'running') n++
  for (const e of reg.starting) if (e.state !== 'running') n++
  return n
}

/** Room for one more pool sandbox: below the pool size and within MAX_RUNNING_SANDBOXES headroom. */
function wanted (reg: Registry): boolean {
  if (reg.opts.poolSize <= 0 || reg.closed || !reg.bootstrapped || reg.engineUp === false) return false
  if (poolRunning(reg) >= reg.opts.poolSize) return false
  return reg.opts.maxRunning === 0 || chatsRunning(reg) + poolRunning(reg) < reg.opts.maxRunning
}

/** Refill in the background: one create at a time, deferred while chats are starting, backing off after failures. */
export function refill (reg: Registry): void {
  const p = poolOf(reg)
  if (p.filling !== null || !wanted(reg)) return
  p.filling = (async () => {
    while (wanted(reg)) {
      const wait = Math.max(p.retryAt, p.quietUntil) - Date.now()
      if (reg.starting.size > 0 || wait > 0) { await sleep(reg.starting.size > 0 ? 200 : Math.min(wait, 5000)); continue }
      try {
        await createSlot(reg, p)
        p.retryMs = RETRY_MIN_MS
      } catch (err) {
        p.retryAt = Date.now() + p.retryMs
        p.retryMs = Math.min(RETRY_MAX_MS, p.retryMs * 2)
        reg.log.warn({ err, retryInMs: p.retryAt - Date.now() }, 'warm pool: creating a sandbox failed')
        if (reg.engineUp === false) return
      }
    }
  })().finally(() => { p.filling = null })
}

async function createSlot (reg: Registry, p: PoolState): Promise<void> {
  const slot = randomBytes(16).toString('hex')
  const dirs = slotDirs(reg.opts.dataDir, slot)
  const config = poolConfig(reg, slot, new Date(reg.opts.now()))
  p.creating = true
  let id: string | undefined
  try {
    await mkdir(dirs.uploads, { recursive: true, mode: 0o755 })
    await mkdir(dirs.outputs, { mode: 0o750 })
    await chmod(dirs.outputs, 0o750)
    const created = await reg.engine.create(config)
    if (created === 'conflict') throw new Error('pool sandbox name taken')
    id = created.id
    await reg.engine.start(id)
    const ids = await probePoolSandbox(reg, id)
    const uid = reg.opts.uid > 0 ? reg.opts.uid : ids.uid
    const gid = reg.opts.gid > 0 ? reg.opts.gid : ids.gid
    await chown(dirs.outputs, uid, gid).catch(() => {})
    const details = await reg.engine.inspect(id)
    if (details?.running !== true) throw new Error('pool sandbox stopped while starting')
    if (reg.closed) return
    p.ready.push(warm(reg, { slot, id, details, uid, gid }))
    reg.log.info({ slot, pool: p.ready.length }, 'warm pool: sandbox ready')
  } catch (err) {
    await discard(reg, slot, id ?? config.name)
    throw err
  } finally { p.creating = false }
}

/** Opens the ready slot's agent in the background (python's start is most of a claim's wait otherwise: docs/performance.md). */
function warm (reg: Registry, s: PoolSlot): PoolSlot {
  s.agent = newAgentState(s.id, `pool-${s.slot}`)
  void openAgent(reg, s.agent).catch(() => {})
  return s
}

/** Removes a ready slot that no chat claimed, with its agent connection. */
export async function discardSlot (reg: Registry, s: PoolSlot): Promise<void> {
  dropAgent(s.agent)
  await discard(reg, s.slot, s.id)
}

/** Removes a pool sandbox that no chat claimed: container, home volume and data dirs. */
export async function discard (reg: Registry, slot: string, idOrName: string): Promise<void> {
  try {
    await reg.engine.remove(idOrName)
    await reg.engine.removeVolume(poolNames(reg.opts.prefix, slot).volume)
    await rm(slotDirs(reg.opts.dataDir, slot).dir, { recursive: true, force: true })
  } catch (err) {
    reg.log.warn({ slot, err }, 'warm pool: removing an unclaimed sandbox failed (retried at the next pass)')
  }
}

/** On close: the create in flight ends first (≤ 30 s), so nothing appears after the server stopped; it is re-adopted next boot. */
export async function drainPool (reg: Registry): Promise<void> {
  const filling = poolOf(reg).filling
  if (filling === null) return
  let timer: NodeJS.Timeout | undefined
  await Promise.race([filling, new Promise(resolve => { timer = setTimeout(resolve, 30_000) })])
  clearTimeout(timer)
}

/** Takes one ready slot out of the pool (synchronous: two claims can never take the same one). */
export function takeSlot (reg: Registry): PoolSlot | undefined {
  return poolOf(reg).ready.shift()
}

/** MAX_RUNNING_SANDBOXES reached: a pool sandbox gives way before any chat's sandbox is stopped. True when one was removed. */
export async function yieldSlot (reg: Registry): Promise<boolean> {
  const p = takeSlot(reg)
  if (p === undefined) return false
  reg.log.info({ slot: p.slot }, 'warm pool: sandbox capacity reached; an unclaimed sandbox gives way')
  await discardSlot(reg, p)
  return true
}

/**
 * A reaper pass (and boot): pool sandboxes that stopped, vanished, drifted (image, settings) or
 * reached their max age are removed; unknown unclaimed ones (re-adopted at boot) join the pool; then refill.
 */
export async function maintain (reg: Registry, unclaimed: SandboxSummary[]): Promise<void> {
  const p = poolOf(reg)
  const listed = new Map(unclaimed.map(c => [c.id, c]))
  const imageId = await reg.engine.imageId(reg.opts.image).catch(() => null)
  for (const slot of [...p.ready]) {
    const c = listed.get(slot.id)
    const why = c === undefined ? 'gone' : !c.running ? 'stopped' : claimable(reg, slot, imageId)
    if (why === null) continue
    p.ready.splice(p.ready.indexOf(slot), 1)
    reg.log.info({ slot: slot.slot, reason: why }, 'warm pool: replacing a sandbox')
    await discardSlot(reg, slot)
  }
  const known = new Set(p.ready.map(s => s.id))
  for (const c of unclaimed) {
    const slot = slotOf(reg, c)
    if (slot === null || known.has(c.id) || p.claiming.has(c.id) || p.creating) continue
    await rollbackJournal(reg, slot)
    await adoptSlot(reg, p, slot, c, imageId)
  }
  refill(reg)
}

/**
 * A claim journal left by a server that stopped before the engine's claim (pool-claim.ts writes the
 * journal, then the chat's record, then claims): the sandbox is still unclaimed and its dirs untouched,
 * so the claim is rolled back (the chat's record removed when it names this slot).
 */
async function rollbackJournal (reg: Registry, slot: string): Promise<void> {
  const dirs = slotDirs(reg.opts.dataDir, slot)
  let chatId: unknown
  try { chatId = (JSON.parse(await readFile(dirs.journal, 'utf8')) as { chat_id?: unknown }).chat_id } catch { return }
  if (typeof chatId === 'string' && normalizeChatId(chatId) === chatId) {
    const record = join(chatPaths(reg.opts.dataDir, chatId).dir, RECORD)
    const bound = await readRecord(record)
    if (bound?.slot === slot) await rm(record, { force: true })
  }
  await rm(dirs.journal, { force: true })
  reg.log.warn({ slot }, 'warm pool: rolled back a claim interrupted before the engine claimed the sandbox')
}

async function adoptSlot (reg: Registry, p: PoolState, slot: string, c: SandboxSummary, imageId: string | null): Promise<void> {
  const details = c.running ? await reg.engine.inspect(c.id).catch(() => null) : null
  const candidate = details === null ? null : { slot, id: c.id, details, uid: reg.opts.uid, gid: reg.opts.gid }
  if (candidate === null || claimable(reg, candidate, imageId) !== null || p.ready.length >= reg.opts.poolSize) {
    reg.log.info({ slot }, 'warm pool: removing a stale unclaimed sandbox')
    await discard(reg, slot, c.id)
    return
  }
  p.ready.push(warm(reg, candidate))
  reg.log.info({ slot }, 'warm pool: re-adopted an unclaimed sandbox')
}
