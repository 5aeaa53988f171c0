import type { FastifyBaseLogger } from 'fastify'
import { activity, holdLease } from './activity.js'
import { addAddressHook, sandboxAddress } from './addresses.js'
import { fileOp } from './agent-files.js'
import { closeService, readiness, startService } from './boot.js'
import { runCommand } from './command.js'
import type { SandboxEngine } from './engine-types.js'
import { exec, openStream, putFile } from './exec.js'
import { ensure, remove, status } from './lifecycle.js'
import { takeNotices } from './notices.js'
import { diskPass } from './disk-watchdog.js'
import { purge, reap } from './reaper.js'
import { poolOf } from './pool.js'
import { loggedEngine } from './engine-log.js'
import { chatExecEnv, withChatEnv } from './pool-claim.js'
import { createRegistry, entryOf, stopEntry, type Registry, type ServiceOptions } from './registry.js'
import type { SandboxService } from './types.js'

export type { ServiceOptions } from './registry.js'

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
  /** One reaper pass: reconcile with the engine, idle stop, max-age removal. */
  reap: () => Promise<void>
  /** One purge pass; resolves with the number of chats purged. */
  purge: () => Promise<number>
  /** One disk watchdog pass (no-op without a disk limit). */
  diskCheck: () => Promise<void>
}

/**
 * Builds the driver. All state lives in the registry (registry.ts) created here; the files beside
 * this one hold the behaviour by role: lifecycle.ts (ensure, status, remove), exec.ts, command.ts and
 * kill.ts (reaching into a running sandbox), recovery.ts and saturation.ts (a sandbox gone behind our
 * back, a saturated one), disk-quota.ts and disk-watchdog.ts (SANDBOX_DISK_LIMIT), notices.ts (what
 * the model is told), reaper.ts (idle, max age, purge, capacity), boot.ts (bootstrap, re-adoption,
 * readiness), activity.ts (leases, meta.json).
 */
export function createSandboxService (opts: ServiceOptions, engine: SandboxEngine, log: FastifyBaseLogger): CoreSandboxService {
  // Execs into a claimed pool sandbox carry the chat's environment (pool-claim.ts).
  const ref: { reg?: Registry } = {}
  const reg = createRegistry(opts, withChatEnv(loggedEngine(engine, log), id => ref.reg === undefined ? undefined : chatExecEnv(ref.reg, id)), log)
  ref.reg = reg
  const service: CoreSandboxService = {
    engine,
    bootTime: reg.bootTime,
    start: async () => { await startService(reg, service.reap, service.purge) },
    readiness: async () => await readiness(reg),
    close: async () => { await closeService(reg) },
    reap: async () => { await reap(reg) },
    purge: async () => await purge(reg),
    diskCheck: async () => { await diskPass(reg) },
    ensure: async (chatId, o) => await ensure(reg, chatId, o),
    status: async chatId => await status(reg, chatId),
    exec: async (chatId, argv, o) => await exec(reg, chatId, argv, o),
    runCommand: async (chatId, command, o) => await runCommand(reg, chatId, command, o),
    putFile: async (chatId, path, content, o) => { await putFile(reg, chatId, path, content, o) },
    fileOp: async (chatId, op, o) => await fileOp(reg, chatId, op, o),
    openStream: async (chatId, argv, o) => await openStream(reg, chatId, argv, o),
    lease: (chatId, o = {}) => holdLease(reg, entryOf(reg, chatId), o.kind),
    touch: chatId => { activity(reg, entryOf(reg, chatId)) },
    stop: async chatId => { await stopEntry(reg, entryOf(reg, chatId), 'stopped') },
    remove: async (chatId, o) => { await remove(reg, chatId, o) },
    takeNotices: chatId => takeNotices(entryOf(reg, chatId)),
    onEnsure: hook => { reg.hooks.push(hook) },
    onStop: hook => { reg.stopHooks.push(hook) },
    onAddress: hook => { addAddressHook(reg, hook) },
    network: () => reg.network === null || reg.network.gateway === null
      ? null
      : { name: reg.networkName, gateway: reg.network.gateway, subnet: reg.network.subnet, bridge: reg.network.bridge },
    address: async chatId => await sandboxAddress(reg, entryOf(reg, chatId)),
    addMounts: provider => { reg.mountProviders.push(provider) },
    pooled: () => poolOf(reg).ready.length
  }
  return service
}
