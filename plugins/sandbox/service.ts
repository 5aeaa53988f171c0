import type { FastifyBaseLogger } from 'fastify'
import { createActivity } from './activity.js'
import { createAddresses } from './addresses.js'
import { createAgents } from './agent-client.js'
import { createAgentExec } from './agent-exec.js'
import { createFileOp } from './agent-files.js'
import { createConnect } from './agent-connect.js'
import { createBoot } from './boot.js'
import { Chats, type Ensure } from './chats.js'
import { systemClock, type Clock } from './clock.js'
import { createCommand } from './command.js'
import { createBase, type ServiceOptions } from './context.js'
import { createDiskQuota } from './disk-quota.js'
import { createDiskWatchdog } from './disk-watchdog.js'
import { loggedEngine } from './engine-log.js'
import type { SandboxEngine } from './engine-types.js'
import { createExec } from './exec.js'
import { createOutcome } from './exec-outcome.js'
import { createMounts } from './extra-mounts.js'
import { createKill } from './kill.js'
import { createLifecycle, type Lifecycle } from './lifecycle.js'
import { createNetwork } from './network.js'
import { takeNotices } from './notices.js'
import { createPool } from './pool.js'
import { createPoolClaim, withChatEnv, type PoolClaim } from './pool-claim.js'
import { createPrefixLease } from './prefix-lease.js'
import { createReadiness } from './readiness.js'
import { createReaper } from './reaper.js'
import { createRecovery } from './recovery.js'
import { createIdentity } from './sandbox-identity.js'
import { createSaturation } from './saturation.js'
import { createTransitions } from './transitions.js'
import { checkContributor } from './env.js'
import type { SandboxService } from './types.js'

export type { ServiceOptions } from './context.js'

/** Where a sandbox's agent reads the loopback port of its egress relay (sandbox-image/agent/cubicle_egress.py). */
export const EGRESS_PORT_VAR = 'CUBICLE_EGRESS_PORT'

/** The sandbox core: the contract of types.ts plus what the plugin and the tests drive directly. */
export interface CoreSandboxService extends Required<SandboxService> {
  readonly engine: SandboxEngine
  /** when this service was built; re-adopted sandboxes count it as their last activity */
  readonly bootTime: number
  /** Boot: connect, ensure the network, re-adopt, start the reaper. Never throws when the engine is down. */
  start: () => Promise<void>
  /** The engine's check of /ready (Docker: `docker`, fields docker, image, data_dir). */
  readiness: () => Promise<{ ok: boolean, fields: Record<string, string> }>
  /** onClose: timers stop and open exec streams end; sandboxes keep running (re-adopted next boot). */
  close: () => Promise<void>
  /** One reaper pass: reconcile with the engine, idle pause or stop, max-age removal. */
  reap: () => Promise<void>
  /** One purge pass; resolves with the number of chats purged. */
  purge: () => Promise<number>
  /** One disk watchdog pass (no-op without a disk limit). */
  diskCheck: () => Promise<void>
  /**
   * Holds the warm pool's creates until the returned release is called (the plugin releases it when every
   * plugin has loaded, so pool sandboxes carry every contributor's environment and match a chat's).
   */
  holdPool: () => () => void
}

/**
 * Builds the core (docs/engine.md#the-core-inside): the shared parts (context.ts: options, engine,
 * logger, clock, status; chats.ts: the per-chat table), then each role from the parts it names, in
 * dependency order, so that no file reaches another's state. Two calls go upwards and are bound late
 * here: a restart or a recovery starts the sandbox again through lifecycle's ensure(), and every exec
 * into a claimed pool sandbox carries the chat's environment (pool-claim.ts).
 */
export function createSandboxService (opts: ServiceOptions, engine: SandboxEngine, log: FastifyBaseLogger, clock: Clock = systemClock): CoreSandboxService {
  // The two late-bound calls: set once both roles exist, before the service is returned.
  const late: { lifecycle?: Lifecycle, poolClaim?: PoolClaim } = {}
  const ensure: Ensure = async (chatId, o) => {
    if (late.lifecycle === undefined) throw new Error('the sandbox core is not built yet')
    return await late.lifecycle.ensure(chatId, o)
  }
  const wrapped = withChatEnv(loggedEngine(engine, log), id => late.poolClaim?.chatExecEnv(id))
  const base = createBase(opts, wrapped, log, clock)
  const chats = new Chats(opts.prefix)

  const addresses = createAddresses(base, chats)
  const activity = createActivity(base)
  const transitions = createTransitions(base, chats, addresses.dropAddress)
  const quota = createDiskQuota(base)
  const network = createNetwork(base)
  const lease = createPrefixLease(base)
  const mounts = createMounts(base)
  const agents = createAgents(base)
  const readiness = createReadiness(base, agents)
  const saturation = createSaturation(base, transitions, ensure)
  const kill = createKill(base, saturation)
  const outcome = createOutcome(base, chats, saturation)
  const recovery = createRecovery(base, chats, ensure)
  const pool = createPool(base, chats, { readiness, agents, quota })
  const poolClaim = late.poolClaim = createPoolClaim(base, pool)
  const identity = createIdentity(base, pool)
  const disk = createDiskWatchdog(base, chats, transitions)
  const boot = createBoot(base, chats, { lease, network, quota, pool, identity, recovery, addresses, disk })
  const reaper = createReaper(base, chats, { boot, pool, identity, recovery, addresses, transitions })
  const lifecycle = late.lifecycle = createLifecycle(base, chats, { activity, addresses, agents, boot, network, mounts, quota, readiness, poolClaim, reaper, transitions })
  const agentExec = createAgentExec(base, agents, kill, outcome, poolClaim.chatExecEnv)
  const execs = createExec(base, { activity, agentExec, recovery, kill, outcome, transitions })
  const { runCommand } = createCommand(base, { activity, agentExec, recovery, kill, outcome, transitions, disk })
  const fileOp = createFileOp({ recovery, activity, agents })
  const connect = createConnect({ recovery, activity, agents })

  // A sandbox the engine sees end (evicted, deleted outside the server) loses its address and agent
  // stream at once; the next call starts it again (recovery.ts). A warm-pool one is replaced (pool.ts).
  let unwatch: (() => void) | undefined
  const service: CoreSandboxService = {
    engine,
    bootTime: base.bootTime,
    start: async () => {
      unwatch ??= engine.watchSandboxes?.(id => {
        pool.ended(id)
        for (const entry of chats.entries.values()) {
          if (entry.sandboxId !== id) continue
          addresses.dropAddress(entry)
          recovery.noteEnded(entry)
        }
      })
      await boot.start(service.reap, service.purge)
    },
    readiness: async () => await boot.readiness(),
    close: async () => { unwatch?.(); unwatch = undefined; await boot.close() },
    reap: async () => { await reaper.reap() },
    purge: async () => await reaper.purge(),
    diskCheck: async () => { await disk.pass() },
    ensure: async (chatId, o) => await lifecycle.ensure(chatId, o),
    status: async chatId => await lifecycle.status(chatId),
    knownRunning: chatId => chats.knownRunning(chatId),
    exec: async (chatId, argv, o) => await execs.exec(chatId, argv, o),
    runCommand: async (chatId, command, o) => await runCommand(chatId, command, o),
    putFile: async (chatId, path, content, o) => { await execs.putFile(chatId, path, content, o) },
    fileOp: async (chatId, op, o) => await fileOp(chatId, op, o),
    connect: async (chatId, port, o) => await connect(chatId, port, o),
    openStream: async (chatId, argv, o) => await execs.openStream(chatId, argv, o),
    lease: (chatId, o = {}) => activity.holdLease(chats.entryOf(chatId), o.kind),
    touch: chatId => { activity.activity(chats.entryOf(chatId)) },
    stop: async chatId => { await transitions.stopEntry(chats.entryOf(chatId), 'stopped') },
    remove: async (chatId, o) => { await lifecycle.remove(chatId, o) },
    takeNotices: chatId => takeNotices(chats.entryOf(chatId)),
    onEnsure: hook => { lifecycle.addHook(hook) },
    onStart: hook => { lifecycle.addStartHook(hook) },
    onStop: hook => { transitions.addStopHook(hook) },
    onAddress: hook => { addresses.addHook(hook) },
    network: () => {
      const net = network.current()
      return net === null || net.gateway === null ? null : { name: base.networkName, gateway: net.gateway, subnet: net.subnet, ...(net.listen === undefined ? {} : { listen: net.listen }) }
    },
    restrictEgress: async port => {
      if (network.current() === null) throw new Error('the sandbox network is not prepared')
      if (engine.restrictToProxy === undefined) throw new Error(`${engine.label.engine} cannot restrict the sandbox network to the proxy`)
      return (await engine.restrictToProxy(base.networkName, port)).warnings
    },
    egressOverSocket: (port, serve) => {
      // docs/network.md#egress-over-the-agent-socket: the chat is the one whose sandbox's socket accepted the connection.
      if (!base.egressOverSocket || engine.serveEgress === undefined) return false
      engine.serveEgress((id, socket) => {
        let chatId: string | undefined
        for (const entry of chats.entries.values()) if (entry.sandboxId === id) { chatId = entry.names.chatId; break }
        if (chatId === undefined) { socket.destroy(); return }
        serve(chatId, socket)
      })
      base.settings.envContributors.push({ names: [EGRESS_PORT_VAR], env: () => ({ [EGRESS_PORT_VAR]: String(port) }) })
      return true
    },
    address: async chatId => await addresses.addressOf(chats.entryOf(chatId)),
    appAddress: async chatId => {
      if (engine.appAddress === undefined || !base.opts.enableNetwork) return null
      // Wakes a paused sandbox (and starts one the driver stopped itself), as connect() does.
      const id = (await recovery.runningEntry(chatId)).sandboxId
      return id === undefined ? null : await engine.appAddress(id, base.networkName)
    },
    addMounts: provider => { mounts.addProvider(provider) },
    addEnvContributor: contributor => { checkContributor(contributor); base.settings.envContributors.push(contributor) },
    holdPool: () => pool.holdPool(),
    pooled: () => pool.state.ready.length
  }
  return service
}
