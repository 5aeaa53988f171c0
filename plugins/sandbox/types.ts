import type { Duplex } from 'node:stream'
import type { RequestUser } from '../../core/identity.js'

import type { SandboxEngine } from './engine-types.js'

/** The engine interface (docs/contract.md#engines) is part of the contract: engine plugins import it from here. */
export type {
  DiskUsageReport, EngineErrorReason, EngineFailure, EngineNetwork, ExecExit, ExecOutput, ExecProcess, ExecSignal, ExecSpec, LeaseAnswer, LeaseHolder, LeaseRecord, ResourceStats,
  SandboxDetails, SandboxEngine, SandboxSpec, SandboxStorage, SandboxSummary, StorageOwner, StorageSeen, ExtraStorage, StorageInfo, TmpfsSpec, VolumeSummary
} from './engine-types.js'

import type { SandboxFileOp, SandboxFileResult } from './file-op-types.js'
export type { ListeningSocket, SandboxFileKind, SandboxFileOp, SandboxFileResult } from './file-op-types.js'

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

export interface ExecOptions {
  /** default 'assistant' */
  user?: string
  /** default '/home/assistant' */
  cwd?: string
  /** Extra environment for this exec only (per-exec credentials). */
  env?: Record<string, string>
  /** Written to the process's stdin, which is then closed. Without it stdin is empty (EOF). */
  stdin?: Buffer | string
  /** Kill (SIGTERM, SIGKILL 5 s later) after this many ms. Default COMMAND_TIMEOUT. */
  timeoutMs?: number
  signal?: AbortSignal
  /** Keep at most this many bytes of stdout and of stderr (default 32 MiB each); the rest is counted and dropped. */
  maxBytes?: number
  /** Extension: SIGTERM → SIGKILL delay on timeout/abort (default 5 s; the sub-agent uses 10 s). */
  killGraceMs?: number
}

export interface ExecResult {
  /** null when the status is unknown (stream lost, sandbox died) */
  exitCode: number | null
  stdout: Buffer
  stderr: Buffer
  /** bytes seen beyond maxBytes on either stream */
  truncated: boolean
  timedOut: boolean
  cancelled: boolean
}

export interface CommandOptions {
  env?: Record<string, string>
  /** T: SIGTERM to every process of the command at T, SIGKILL at T+5 s, result by T+10 s. */
  timeoutMs: number
  signal?: AbortSignal
  /** Merged stdout+stderr in arrival order, decoded as UTF-8 (replacement chars; sequences never split). */
  onOutput: (text: string) => void
  /**
   * Extension: the command is about to run again from the start because its first attempt never
   * started (the sandbox was saturated and has been restarted); drop the output received so far
   * (it is only the engine's complaint).
   */
  onReset?: () => void
  /** Extension: SIGTERM → SIGKILL delay (default 5 s); the result still comes at most 10 s after the SIGTERM, or 5 s after the SIGKILL when that is later. */
  killGraceMs?: number
}

/**
 * Extension (driver addition): what a lease holds. `call` (default) is a running tool call: it blocks
 * both the idle stop and the max-age removal. `socket` is an open terminal/CDP WebSocket: it blocks
 * the idle stop only; on max-age removal the holder is told through onStop and closes with 1001.
 */
export interface LeaseOptions { kind?: 'call' | 'socket' }

/**
 * Extension: why a sandbox stopped or went away (onStop). 'memory': a paused sandbox stopped before its
 * CONTAINER_PAUSED_TIMEOUT because the machine's memory ran short. 'paused' is no stop: the idle reaper froze it,
 * the next access wakes it (and runs the onEnsure hooks again).
 */
export type StopReason = 'idle' | 'max-age' | 'capacity' | 'stopped' | 'removed' | 'purged' | 'killed' | 'disk-limit' | 'paused' | 'memory'
export type StopHook = (chatId: string, reason: StopReason) => void
/** A sandbox's address on the sandbox network (null: it has none any more: stopped, removed, gone). */
export type AddressHook = (chatId: string, address: string | null) => void

/** Extension (docs/contract.md#skills): a read-only bind mount a sandbox gets when it is created. */
export interface SandboxMount {
  /** Absolute path as the Docker daemon sees it. */
  source: string
  /** Absolute path inside the sandbox, below /mnt/ (e.g. /mnt/skills/user/<name>). */
  target: string
}

/**
 * Extension (docs/contract.md#skills): asked each time a sandbox is created or a stopped one is about to start, with
 * the caller's identity (`email` falls back to the chat's meta.json). A stopped sandbox whose answer
 * changed is recreated (volume and data kept). It runs under the chat's lock: answer promptly; a
 * rejection counts as no mounts and is logged.
 */
export type MountProvider = (req: { chatId: string, email?: string, user?: RequestUser }) => Promise<SandboxMount[]>

/**
 * Extension (docs/engine.md#environment): variables a plugin puts in every sandbox's own environment (the
 * egress plugin's proxy settings, the sub-agent's `SUBAGENT_CLI`), and names it keeps out of it. The core
 * asks every contributor when it builds a sandbox's spec (a chat's or a warm pool sandbox's: the answer
 * must not depend on the chat) and when it checks a stopped sandbox for drift.
 */
export interface EnvContributor {
  /**
   * The names this contributor manages: values outside them are ignored, and a stopped sandbox whose
   * value of one of them differs from the current answer (added, changed or gone) is recreated at its next start.
   */
  readonly names: readonly string[]
  /**
   * Names that never enter a sandbox's own environment, whatever any layer says (provider credentials:
   * the owner passes them only in the environment of the processes that need them). Also compared for
   * drift, so a sandbox created while one was still there is recreated.
   */
  readonly withheld?: readonly string[]
  /** The variables now; an empty value or a missing name leaves the name out. */
  env: () => Record<string, string>
}

/** Extension: options of openStream(). */
export interface StreamOptions {
  /** default 'assistant' */
  user?: string
  /** default '/home/assistant' */
  cwd?: string
  env?: Record<string, string>
  /** allocate a TTY (terminal); without it the output is Docker-multiplexed and demux() splits it */
  tty?: boolean
}

/** Extension: a long-lived exec with stdin attached (terminal TTY, `socat - TCP:127.0.0.1:<port>` relays). */
export interface SandboxStream {
  /** Write stdin here (end() closes it). Read output through demux(), not from this socket directly. */
  socket: Duplex
  /** Starts delivering output: with a TTY every byte goes to onStdout; without, stdout and stderr are split. */
  demux (onStdout: (data: Buffer) => void, onStderr?: (data: Buffer) => void): void
  /** TTY size; no-op without a TTY */
  resize (cols: number, rows: number): Promise<void>
  /** after the socket closed: the exit status, null if unknown */
  exitCode (): Promise<number | null>
  /** Ends the connection (the process gets EOF/SIGHUP as Docker delivers it). */
  close (): void
}

export interface CommandResult {
  /** null when unknown: the sandbox stopped or the stream was lost */
  exitCode: number | null
  timedOut: boolean
  cancelled: boolean
  /**
   * Extension: what happened to the sandbox around this command, oldest first (a restart after it ran
   * out of processes, its recreation after it was removed outside the server, the disk limit, …).
   * Includes the notices pending since the last command; each event is reported once, except the
   * `disk-limit` warning, repeated while the chat stays over its limit. When exitCode is null, the
   * first notice (if any) is why.
   */
  notices?: SandboxNotice[]
}

/**
 * Extension: what the driver did on its own. `restarted`: every process ended, all files kept;
 * `recreated`: a new sandbox on the same workspace (/home/assistant and outputs kept, files elsewhere
 * lost); `stopped`: it is stopped now and the next call starts it again; `none`: nothing was done.
 */
export type NoticeAction = 'none' | 'stopped' | 'restarted' | 'recreated'

/** Extension: bytes a chat uses on disk, as the engine and the server measure them (never the sandbox). */
export interface DiskUsage {
  total: number
  /** /home/assistant */
  home: number
  /** /mnt/user-data/outputs */
  outputs: number
  /** everything else the sandbox wrote (outside home, outputs and the /tmp tmpfs) */
  other: number
}

/** Extension: an event the tools should tell the model about (engine-neutral; see CommandResult.notices). */
export type SandboxNotice =
  /** the sandbox's process limit was reached (a fork bomb or runaway command kept it full) */
  | { kind: 'pids-limit', action: NoticeAction, limit: number }
  /** the kernel killed processes because the sandbox's memory limit was reached */
  | { kind: 'out-of-memory', action: NoticeAction, limit: number }
  /** the chat's files exceed its disk limit (SANDBOX_DISK_LIMIT) */
  | { kind: 'disk-limit', action: NoticeAction, limit: number, usage: DiskUsage }
  /** the sandbox was stopped (`removed`: deleted) by something other than this server, or by this server on purpose */
  | { kind: 'sandbox-stopped', action: NoticeAction, removed: boolean, by: 'outside' | 'server' }
  /** the connection to the command was lost while the sandbox kept running (the command may still run) */
  | { kind: 'stream-lost', action: NoticeAction }
  /** processes of a timed-out or cancelled command could not be killed from inside the sandbox */
  | { kind: 'unkillable', action: NoticeAction }

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
  connect? (chatId: string, port: number, opts: { timeoutMs: number }): Promise<Duplex | undefined>
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
