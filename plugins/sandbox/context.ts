import type { FastifyBaseLogger } from 'fastify'
import type { Clock } from './clock.js'
import { isEngineFailure } from './engine-error.js'
import type { ExecProcess, SandboxEngine } from './engine-types.js'
import { SANDBOX_ENGINE_BUSY, SANDBOX_ENGINE_UNAVAILABLE, SANDBOX_FAILED, SANDBOX_IMAGE_MISSING, SandboxSetupRefused } from './errors.js'
import type { SandboxSettings } from './sandbox-spec.js'
import type { ChatStore } from './data-dirs.js'

/*
 * What every part of the sandbox core is given (docs/engine.md#the-core-inside): the resolved options,
 * the engine, the logger, the clock, the service-wide status and the open streams closed at shutdown.
 * Nothing here knows a chat: per-chat state is chats.ts, and each role (lifecycle, exec, pool, reaper,
 * recovery, disk, boot) is an object built by service.ts from the parts it names in its deps.
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
  dataDir: string
  memLimit: number
  cpuLimit: number
  pidsLimit: number
  diskLimit: number
  createTimeoutS: number
  idleTimeoutS: number
  /** CONTAINER_PAUSED_TIMEOUT: an idle sandbox is paused, then stopped after this long; 0 = stopped at once */
  pausedTimeoutS: number
  /**
   * The share of the machine's memory available now (0 to 1); below PAUSED_MEMORY_FLOOR paused sandboxes
   * are stopped before their time (reaper.ts). Default: the server machine's (os.freemem / os.totalmem).
   */
  memoryAvailable?: () => number
  maxAgeHours: number
  dataMaxAgeDays: number
  maxRunning: number
  /** SANDBOX_POOL_SIZE (pool.ts); 0 disables */
  poolSize: number
  commandTimeoutS: number
  uid: number
  gid: number
  sandboxEnv: Record<string, string>
  reaperIntervalMs: number
  purgeIntervalMs: number
  readyTimeoutMs: number
  killGraceMs: number
  stopGraceS: number
  diskCheckIntervalMs: number
  /** SANDBOX_LEASE_TIMEOUT: seconds without renewal after which another instance takes the prefix's lease */
  leaseTimeoutS: number
  /** the chat's directories, meta record and purge (chat-storage: the core builds no chat path itself) */
  storage: ChatStore
}

/** The service-wide flags (boot.ts sets them; every role reads them). */
export interface CoreStatus {
  /** close() ran: nothing new is started */
  closed: boolean
  /** the engine answered the last call that tried it (null: not asked yet) */
  engineUp: boolean | null
  /** the lease, the network and re-adoption are done (boot.ts); cleared when the lease is lost */
  bootstrapped: boolean
}

export interface CoreBase {
  readonly opts: ServiceOptions
  readonly engine: SandboxEngine
  readonly log: FastifyBaseLogger
  readonly clock: Clock
  /** when this service was built; re-adopted sandboxes count it as their last activity */
  readonly bootTime: number
  /** the sandbox network's name (SANDBOX_NETWORK, else `{prefix}-sandboxes`) */
  readonly networkName: string
  /**
   * Egress goes over the agent socket (the engine offers serveEgress and ENABLE_NETWORK is on,
   * docs/network.md#egress-over-the-agent-socket): new sandboxes get no network, none is prepared for them
   */
  readonly egressOverSocket: boolean
  /** what every sandbox spec is built from (sandbox-spec.ts); network.ts sets its network fields at boot */
  readonly settings: SandboxSettings
  readonly status: CoreStatus
  /** open engine processes and agent links, closed by close() */
  readonly streams: Set<Pick<ExecProcess, 'close'>>
}

export function createBase (opts: ServiceOptions, engine: SandboxEngine, log: FastifyBaseLogger, clock: Clock): CoreBase {
  const networkName = opts.network.trim() || `${opts.prefix}-sandboxes`
  const egressOverSocket = opts.enableNetwork && engine.serveEgress !== undefined
  return {
    opts,
    engine,
    log,
    clock,
    bootTime: clock.now(),
    networkName,
    egressOverSocket,
    settings: {
      image: opts.image,
      prefix: opts.prefix,
      networkMode: opts.enableNetwork && !egressOverSocket ? networkName : 'none',
      memLimit: opts.memLimit,
      cpuLimit: opts.cpuLimit,
      pidsLimit: opts.pidsLimit,
      sandboxEnv: opts.sandboxEnv,
      envContributors: [],
      diskLimit: opts.diskLimit,
      labelsAtClaim: engine.labelsAtClaim
    },
    status: { closed: false, engineUp: null, bootstrapped: false },
    streams: new Set()
  }
}

/** An error's message, for text built from it (a log line takes the error itself: `{ err }`, pino's serializer). */
export function describe (err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}

/** SANDBOX_ENGINE_UNAVAILABLE in the engine's own words ("the Docker engine is not reachable; …"). */
export function engineUnavailable (base: Pick<CoreBase, 'engine'>): Error {
  return new SANDBOX_ENGINE_UNAVAILABLE(base.engine.label.engine)
}

/** SANDBOX_IMAGE_MISSING naming the image and the engine's host ("… missing on the Docker host; …"). */
export function imageMissing (base: Pick<CoreBase, 'engine' | 'opts'>): Error {
  return new SANDBOX_IMAGE_MISSING(base.opts.image, base.engine.label.host)
}

/** A sandbox created at `createdAt` (its label) is older than SANDBOX_MAX_AGE_HOURS. */
export function tooOld (base: Pick<CoreBase, 'clock' | 'opts'>, createdAt: string | undefined): boolean {
  if (createdAt === undefined) return false
  const t = Date.parse(createdAt)
  return Number.isFinite(t) && base.clock.now() - t > base.opts.maxAgeHours * 3600_000
}

/**
 * An adapter error as the contract's coded error: the engine gone (unavailable), the engine alive but
 * too busy to answer in time (retriable, engine-neutral), or a failure logged in full and
 * reported by reference.
 */
export function mapError (base: Pick<CoreBase, 'engine' | 'log' | 'status'>, err: unknown): Error {
  if (err instanceof SandboxSetupRefused) return new SANDBOX_FAILED('this server refused its sandbox setup; the server log says why')
  if (isEngineFailure(err)) {
    if (err.busy) {
      base.log.warn({ err }, 'the engine is busy; the call was refused for the caller to retry')
      return new SANDBOX_ENGINE_BUSY()
    }
    if (err.unavailable) {
      base.status.engineUp = false
      return engineUnavailable(base)
    }
    base.log.error({ err }, 'engine request failed')
    return new SANDBOX_FAILED('see the server log')
  }
  return err instanceof Error ? err : new Error(String(err))
}
