import type { FastifyBaseLogger } from 'fastify'
import { chatKey } from '../../core/chat-id.js'
import type { SandboxSettings } from './sandbox-spec.js'
import type { ChatMeta } from './data-dirs.js'
import type { EngineNetwork, ExecProcess, LeaseHolder, SandboxEngine } from './engine-types.js'
import { newHolder } from './prefix-lease.js'
import { sandboxNames, type SandboxNames } from './names.js'
import type { RequestUser } from '../../core/identity.js'
import type { DiskState, QuotaSupport } from './disk-quota.js'
import type { NoticeLog } from './notices.js'
import type { AgentState } from './agent-client.js'
import type { PoolBinding } from './pool-claim.js'
import type { AddressHook, EnsureHook, MountProvider, SandboxInfo, StopHook } from './types.js'

export { armDeadline, clampMs, describe, engineUnavailable, execStartError, imageMissing, infoOf, mapError, notifyStop, requireRunning, sleep, stopEntry, tooOld } from './registry-transitions.js'

/*
 * The driver's state, shared by lifecycle.ts, exec.ts, reaper.ts and boot.ts: one Entry per chat
 * (cached running state, per-chat lock, leases, meta.json cache) plus the service-wide flags, the
 * per-chat lock and the change counter. registry-transitions.ts holds the transitions and the error
 * mapping every other file uses (re-exported here).
 */

/** Resolved plugin options (schemas.ts after defaults). */
export interface ServiceOptions {
  image: string
  prefix: string
  network: string
  enableNetwork: boolean
  /** SANDBOX_AGENT: use cubicle-agent (agent-client.ts) where it can serve a call */
  agent: boolean
  /** SANDBOX_AGENT_MAX_BYTES_PER_SECOND: what the server reads of one agent stream a second (agent-client.ts) */
  agentBytesPerSecond: number
  /** port of the egress proxy on the network's gateway; 0 = no proxy variables */
  egressPort: number
  dataDir: string
  dataDirHost: string
  memLimit: number
  cpuLimit: number
  pidsLimit: number
  diskLimit: number
  createTimeoutS: number
  idleTimeoutS: number
  maxAgeHours: number
  dataMaxAgeDays: number
  maxRunning: number
  /** SANDBOX_POOL_SIZE (pool.ts); 0 disables */
  poolSize: number
  commandTimeoutS: number
  uid: number
  gid: number
  skillsDirHost: string
  subagentCli: string
  sandboxEnv: Record<string, string>
  reaperIntervalMs: number
  purgeIntervalMs: number
  readyTimeoutMs: number
  killGraceMs: number
  stopGraceS: number
  diskCheckIntervalMs: number
  /** SANDBOX_LEASE_TIMEOUT: seconds without renewal after which another instance takes the prefix's lease */
  leaseTimeoutS: number
  now: () => number
}

type State = 'unknown' | 'running' | 'stopped' | 'absent'

/** In-memory view of one chat's sandbox. The running state is cached; failures invalidate it. */
export interface Entry {
  names: SandboxNames
  state: State
  sandboxId?: string
  createdAt?: string
  lastActive: number
  callLeases: number
  socketLeases: number
  /** tail of the per-chat lock chain; `locked` > 0 while something holds or waits for it */
  tail: Promise<void>
  locked: number
  ensuring: Promise<{ info: SandboxInfo, started: boolean }> | null
  stopping: boolean
  meta?: ChatMeta
  /** address on the sandbox network of the current start (addresses.ts) */
  address?: { sandboxId: string, ip: string }
  /** meta.json was read (or found missing) once */
  metaLoaded: boolean
  metaWrittenAt: number
  /** value of the service's change counter at this entry's last state change (reaper races) */
  epoch: number
  /** the caller of the last ensure(): the driver starts the sandbox again on its behalf (recovery) */
  user?: RequestUser
  /**
   * The sandbox is not running because of the driver itself (saturation, disk limit, unkillable
   * processes) or something outside the server (docker rm/stop/kill): the next exec starts it again
   * instead of failing. Cleared by stop(), remove() and the reaper's own stops.
   */
  recoverable: boolean
  /** when the running container last became ready (ms, the service clock) */
  startedAt: number
  /** a restart after saturation in flight (saturation.ts), joined by concurrent callers */
  restarting: Promise<void> | null
  /** notices for the model (notices.ts) */
  notices: NoticeLog
  /** the disk watchdog's view of this chat (disk-watchdog.ts) */
  disk: DiskState
  /** its home volume came from the warm pool (pool-claim.ts); null: no; undefined: not looked up yet */
  pool?: PoolBinding | null
  /** the in-sandbox agent's connection and backoff (agent-client.ts), created on first use */
  agent?: AgentState
}

export interface Registry {
  readonly opts: ServiceOptions
  readonly engine: SandboxEngine
  readonly log: FastifyBaseLogger
  readonly settings: SandboxSettings
  readonly networkName: string
  /** the internal sandbox network once bootstrap prepared it; null without one (fail closed: network none) */
  network: EngineNetwork | null
  readonly bootTime: number
  readonly entries: Map<string, Entry>
  readonly hooks: EnsureHook[]
  readonly stopHooks: StopHook[]
  /** told each sandbox's address on the sandbox network (addresses.ts) */
  readonly addressHooks: AddressHook[]
  /** extra mounts (docs/contract.md#skills; extra-mounts.ts) */
  readonly mountProviders: MountProvider[]
  /** open engine processes and agent links, closed by close() */
  readonly streams: Set<Pick<ExecProcess, 'close'>>
  /** entries between reserveSlot() and the end of their ensure (capacity count) */
  readonly starting: Set<Entry>
  /** containers already reported as not adoptable (logged once each) */
  readonly ignored: Set<string>
  bootstrapped: boolean
  /** this instance, as the prefix's lease names it (prefix-lease.ts) */
  readonly holder: LeaseHolder
  /** the prefix's lease while this instance holds it */
  lease: { token: string, timer: NodeJS.Timeout } | null
  /** why the last bootstrap refused the setup (logged once per reason), null when it did not */
  refusal: string | null
  bootstrapping: Promise<void> | null
  engineUp: boolean | null
  ownerWarned: boolean
  reaperTimer: NodeJS.Timeout | undefined
  purgeTimer: NodeJS.Timeout | undefined
  reaping: Promise<void> | null
  epoch: number
  closed: boolean
  /** whether the storage driver takes a writable-layer quota (disk-quota.ts) */
  quota: QuotaSupport
  diskTimer: NodeJS.Timeout | undefined
  /** the disk watchdog's pass in flight (single flight) */
  diskPass: Promise<void> | null
  /** an extra disk pass is scheduled (after a command of a chat over its limit) */
  diskPoke: NodeJS.Timeout | undefined
}

export function createRegistry (opts: ServiceOptions, engine: SandboxEngine, log: FastifyBaseLogger): Registry {
  const networkName = opts.network.trim() || `${opts.prefix}-sandboxes`
  return {
    opts,
    engine,
    log,
    networkName,
    network: null,
    bootTime: opts.now(),
    settings: {
      image: opts.image,
      prefix: opts.prefix,
      networkMode: opts.enableNetwork ? networkName : 'none',
      dataDirHost: opts.dataDirHost,
      memLimit: opts.memLimit,
      cpuLimit: opts.cpuLimit,
      pidsLimit: opts.pidsLimit,
      skillsDirHost: opts.skillsDirHost,
      subagentCli: opts.subagentCli,
      sandboxEnv: opts.sandboxEnv,
      egressProxy: null,
      diskLimit: opts.diskLimit,
      labelsAtClaim: engine.labelsAtClaim
    },
    entries: new Map(),
    hooks: [],
    stopHooks: [],
    addressHooks: [],
    mountProviders: [],
    streams: new Set(),
    starting: new Set(),
    ignored: new Set(),
    bootstrapped: false,
    holder: newHolder(),
    lease: null,
    refusal: null,
    bootstrapping: null,
    engineUp: null,
    ownerWarned: false,
    reaperTimer: undefined,
    purgeTimer: undefined,
    reaping: null,
    epoch: 0,
    closed: false,
    quota: opts.diskLimit > 0 ? 'unknown' : 'off',
    diskTimer: undefined,
    diskPass: null,
    diskPoke: undefined
  }
}

export function entryOf (reg: Registry, chatId: string): Entry {
  const key = chatKey(chatId)
  let e = reg.entries.get(key)
  if (e === undefined) {
    e = {
      names: sandboxNames(reg.opts.prefix, chatId),
      state: 'unknown',
      lastActive: 0,
      callLeases: 0,
      socketLeases: 0,
      tail: Promise.resolve(),
      locked: 0,
      ensuring: null,
      stopping: false,
      metaLoaded: false,
      metaWrittenAt: 0,
      epoch: 0,
      recoverable: false,
      startedAt: 0,
      restarting: null,
      notices: { pending: [], actions: [] },
      disk: { over: null, stoppedAt: 0, stoppedTotal: 0 }
    }
    reg.entries.set(key, e)
  }
  return e
}

export async function withLock<T> (entry: Entry, fn: () => Promise<T>): Promise<T> {
  const previous = entry.tail
  let release!: () => void
  entry.tail = new Promise<void>(resolve => { release = resolve })
  entry.locked++
  try {
    await previous
    return await fn()
  } finally {
    entry.locked--
    release()
  }
}

export function changed (reg: Registry, entry: Entry): void {
  entry.epoch = ++reg.epoch
}
