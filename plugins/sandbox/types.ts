import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import type { RequestUser } from '../../core/identity.js'

import type { AppAddress, SandboxEngine } from './engine-types.js'

/** The engine interface (docs/contract.md#engines) is part of the contract: engine plugins import it from here. */

/**
 * A connection into a sandbox (SandboxService.connect) as a net.Socket look-alike, so that Node's http client
 * and ws drive it without a wrapper: setTimeout has net.Socket's idle semantics ('timeout' once no byte went
 * either way for that long; 0 turns it off and removes the callback), the other socket options are no-ops.
 */
export interface SandboxSocket extends Duplex {
  setTimeout (ms: number, callback?: () => void): this
  setNoDelay (): this
  setKeepAlive (): this
  ref (): this
  unref (): this
}
export type {
  AppAddress, DiskUsageReport, EngineErrorReason, EngineFailure, EngineNetwork, ExecExit, ExecOutput, ExecProcess, ExecSignal, ExecSpec, LeaseAnswer, LeaseHolder, LeaseRecord, ResourceStats,
  SandboxDetails, SandboxEngine, SandboxSpec, SandboxStorage, SandboxSummary, StorageOwner, StorageSeen, ExtraStorage, StorageInfo, TmpfsSpec, VolumeSummary
} from './engine-types.js'

import type { SandboxFileOp, SandboxFileResult } from './file-op-types.js'
export type { ListeningSocket, SandboxFileKind, SandboxFileOp, SandboxFileResult } from './file-op-types.js'
import type { CommandOptions, CommandResult, ExecOptions, ExecResult, LeaseOptions, SandboxNotice, SandboxStream, StreamOptions } from './exec-types.js'
export type { CommandOptions, CommandResult, DiskUsage, ExecOptions, ExecResult, LeaseOptions, NoticeAction, SandboxNotice, SandboxStream, StreamOptions } from './exec-types.js'
import type { AddressHook, EnvContributor, MountProvider, StartHook, StopHook } from './extension-types.js'
export type { AddressHook, EnvContributor, MountProvider, SandboxMount, StartFiles, StartHook, StopHook, StopReason } from './extension-types.js'

/** A running sandbox of one chat. */
export interface SandboxInfo {
  chatId: string
  /** sha256(chatId)[0:32] */
  chatKey: string
  /** the engine's id of the sandbox (Docker: the container id) */
  sandboxId: string
  /** the engine-level name, `{prefix}-sbx-{K}` (docs/contract.md#sandbox-configuration) */
  name: string
  /** RFC 3339, from the cu.created-at label */
  createdAt: string
}

export type SandboxState = 'running' | 'stopped' | 'absent'

export interface SandboxStatus {
  /** a paused sandbox (idle, its processes frozen) is 'running': any exec or ensure() wakes it */
  state: SandboxState
  /** the sandbox is paused now (state is 'running') */
  paused?: boolean
  /** meta.json exists for the chat (it was used before) */
  metaExists: boolean
  /** the engine's id of the sandbox, when it exists */
  sandboxId?: string
}

export interface EnsureOptions {
  /** Who is calling; recorded in meta.json and handed to onEnsure hooks (README rendering is per user). */
  user?: RequestUser
  /** Bound on waiting for create/start (CONTAINER_CREATE_TIMEOUT); creation continues in the background. */
  timeoutMs?: number
}

/** Runs after every successful ensure(), in registration order, before ensure() resolves. */
export type EnsureHook = (sandbox: SandboxInfo, event: { started: boolean, user?: RequestUser }) => Promise<void>

/**
 * The engine-neutral sandbox contract. The Docker driver implements it; a Kubernetes driver or an
 * in-sandbox agent could replace it without touching the tools. Errors are coded (SANDBOX_*).
 */
export interface SandboxService {
  /**
   * Returns the chat's running sandbox, creating or starting it when needed, under a per-chat
   * single-flight lock. Rejects with SANDBOX_CREATE_TIMEOUT (message `sandbox creation timed out (Ns)`),
   * SANDBOX_IMAGE_MISSING, SANDBOX_CAPACITY (`sandbox capacity reached`), SANDBOX_ENGINE_UNAVAILABLE.
   * Counts as activity.
   */
  ensure (chatId: string, opts?: EnsureOptions): Promise<SandboxInfo>
  /** Never creates or starts anything. */
  status (chatId: string): Promise<SandboxStatus>
  /**
   * Extension: whether the server's own record says the chat's sandbox runs (no engine call, never
   * starts anything): for checks right after a call that ran in it. A sandbox stopped behind the
   * server's back counts as running until a call or the reaper finds out; status() asks the engine.
   */
  knownRunning? (chatId: string): boolean
  /**
   * Runs argv (no shell) in the running sandbox and collects its output. A sandbox found gone or
   * stopped behind the server's back is started again (recreated on the same workspace when removed),
   * one that cannot start the process because it is saturated is restarted, and the exec runs once
   * more; such events are reported with the next runCommand result. Rejects SANDBOX_NOT_RUNNING when
   * the sandbox was never ensured or was stopped on purpose (stop(), idle, max age, capacity).
   */
  exec (chatId: string, argv: string[], opts?: ExecOptions): Promise<ExecResult>
  /**
   * Runs `bash -c command` as assistant in /home/assistant with empty stdin, streaming merged output.
   * Returns as soon as the top-level bash exits (draining output for at most 1 s), even when
   * background children keep the output open. Every process started by the command is killed on
   * timeout or abort. Recovers like exec(); a sandbox found saturated (process limit reached) at the
   * end of the command is restarted; `notices` says what happened.
   */
  runCommand (chatId: string, command: string, opts: CommandOptions): Promise<CommandResult>
  /** Writes a file through the archive API (owner and mode as given; default root:root 0644). Parent dirs must exist. */
  putFile (chatId: string, path: string, content: Buffer | string, opts?: { mode?: number, uid?: number, gid?: number }): Promise<void>
  /** Holds the sandbox against the idle reaper until the returned release() is called (tool calls, open sockets). */
  lease (chatId: string, opts?: LeaseOptions): () => void
  /** Records activity (uploads, terminal heartbeat); never starts anything. */
  touch (chatId: string): void
  /** docker stop with 10 s grace; no-op when not running. */
  stop (chatId: string): Promise<void>
  /** Removes the container; the volume and data stay unless `purge` is set. */
  remove (chatId: string, opts?: { purge?: boolean }): Promise<void>
  /** Register while plugins load, never per request. */
  onEnsure (hook: EnsureHook): void
  /**
   * Extension: notices pending for the chat (the events of CommandResult.notices not yet reported, plus
   * the disk-limit warning while it applies), for tools that do not run commands. Taking them marks
   * the events reported.
   */
  takeNotices? (chatId: string): SandboxNotice[]
  /**
   * Extension: files written while a chat's sandbox starts, at the same time as the wait for it to be ready
   * (the tier-2 README). Register while plugins load.
   */
  onStart? (hook: StartHook): void
  /** Extension: told whenever a sandbox is stopped or removed (idle, max age, capacity, explicit). Register while plugins load. */
  onStop? (hook: StopHook): void
  /**
   * Extension: opens an exec with stdin attached and a raw stream, for relays and terminals. Rejects
   * SANDBOX_NOT_RUNNING. The caller holds a lease (kind 'socket') for as long as it is open.
   */
  openStream? (chatId: string, argv: string[], opts?: StreamOptions): Promise<SandboxStream>
  /** Extension: the internal sandbox network once prepared; null without one (ENABLE_NETWORK=false, Docker not reached yet, fail-closed). */
  network? (): SandboxNetwork | null
  /**
   * Extension (docs/engine.md#network): asks the engine to close every path from the sandbox network to the
   * server's host but TCP `port` on the gateway (the egress proxy). Resolves with warnings about what only
   * partly worked; rejects when there is no network yet or the engine could not (or cannot) do it.
   */
  restrictEgress? (port: number): Promise<string[]>
  /**
   * Extension: told a sandbox's address on the sandbox network whenever a start gives it one (before
   * ensure() resolves, so before the first command of that start), when a listing finds it (boot
   * re-adoption, the reaper), and null when it stops, is removed or is found gone. Registering replays
   * the addresses known already. Synchronous; register while plugins load.
   */
  onAddress? (hook: AddressHook): void
  /**
   * Extension (docs/network.md#egress-over-the-agent-socket): the sandboxes' egress through `serve` instead of a
   * network address, when the engine offers it (SandboxEngine.serveEgress) and ENABLE_NETWORK is on: sandboxes
   * created from then on have no network interface, their agent relays 127.0.0.1:`port` to the server, and
   * every such connection reaches `serve` with the chat whose sandbox it came from. False: sandboxes keep the
   * network path (network(), onAddress). Register while plugins load, before boot.
   */
  egressOverSocket? (port: number, serve: (chatId: string, socket: Socket) => void): boolean
  /** Extension: a running sandbox's address on the sandbox network (of its current start), null when it has none. Never starts anything. */
  address? (chatId: string): Promise<string | null>
  /** Extension (docs/contract.md#skills): extra read-only mounts per sandbox (user skills). Register while plugins load. */
  addMounts? (provider: MountProvider): void
  /** Extension (docs/engine.md#environment): a plugin's variables of every sandbox's own environment. Register while plugins load. */
  addEnvContributor? (contributor: EnvContributor): void
  /**
   * Extension (docs/contract.md#in-sandbox-agent): a file operation through the in-sandbox agent as `assistant`, without
   * spawning a process; undefined when the agent cannot serve it now (old image, agent down, a write
   * larger than one frame, the stream lost mid-operation): run the equivalent command with exec().
   * Rejects like exec() (SANDBOX_NOT_RUNNING); a sandbox found gone is recovered first.
   */
  fileOp? (chatId: string, op: SandboxFileOp, opts: { timeoutMs: number, signal?: AbortSignal }): Promise<SandboxFileResult | undefined>
  /**
   * Extension (docs/contract.md#in-sandbox-agent): a TCP connection to `port` on the sandbox's loopback
   * (127.0.0.1, else ::1) through the in-sandbox agent, with flow control both ways; undefined when the
   * agent cannot serve it now (old image, agent down): relay through openStream() instead. Rejects with
   * code ECONNREFUSED when nothing listens, ETIMEDOUT after `timeoutMs`, ECONNFAILED for any other failure to
   * connect, and like exec() (SANDBOX_NOT_RUNNING).
   * The caller holds a lease (kind 'socket') for as long as it is open.
   */
  connect? (chatId: string, port: number, opts: { timeoutMs: number }): Promise<SandboxSocket | undefined>
  /**
   * Extension (docs/engine.md#app-addresses): the chat's running sandbox's own address on the sandbox network,
   * where the server may connect to an app that listens beyond loopback, as the engine reports it now; null
   * when the engine has no such capability, cannot say, or the server cannot reach it. Wakes a paused sandbox
   * (and starts one the driver stopped itself) as connect() does; rejects like exec() (SANDBOX_NOT_RUNNING).
   * Asked again after connecting, an equal answer (same generation) proves
   * the connection reached this sandbox: an address may belong to another sandbox once this one stopped.
   */
  appAddress? (chatId: string): Promise<AppAddress | null>
  /** Extension (docs/contract.md#warm-pool): started, ready sandboxes waiting in the warm pool (no chat yet). */
  pooled? (): number
}

/** Extension: the sandbox network as the server sees it (internal: no route out). */
export interface SandboxNetwork {
  name: string
  /** the server's address on it: where the egress proxy listens and sandboxes reach it */
  gateway: string
  /** where the server's listeners for sandboxes bind when not on the gateway (Kubernetes: all addresses; docs/engine.md#network) */
  listen?: string
  subnet: string | null
}

declare module 'fastify' {
  interface FastifyInstance {
    sandbox: SandboxService
    /** Decorated by an engine plugin (sandbox-docker); used by the sandbox core only. */
    sandboxEngine: SandboxEngine
  }
}
