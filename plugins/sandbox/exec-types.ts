import type { Duplex } from 'node:stream'
import type { ListeningSocket } from './file-op-types.js'

/*
 * The sandbox service's calls into a sandbox, part of its contract (types.ts re-exports them; other plugins
 * import them from there): exec and bash_tool commands with their results and notices, leases on a sandbox,
 * long-lived streams.
 */

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
   * started (the sandbox was saturated and has been restarted, or the agent's stream was lost before
   * the process existed); drop the output received so far (it is only the engine's complaint).
   */
  onReset?: () => void
  /** Extension: SIGTERM → SIGKILL delay (default 5 s); the result still comes at most 10 s after the SIGTERM, or 5 s after the SIGKILL when that is later. */
  killGraceMs?: number
  /**
   * Extension: up to this many (≤ 4096) of the sandbox's listening TCP sockets, read right after the command
   * exited, in CommandResult.listening, where the engine can say them with the exit (the in-sandbox agent:
   * no round trip after the command).
   */
  listening?: number
}

/**
 * Extension (driver addition): what a lease holds. `call` (default) is a running tool call: it blocks
 * both the idle stop and the max-age removal. `socket` is an open terminal/CDP WebSocket: it blocks
 * the idle stop only; on max-age removal the holder is told through onStop and closes with 1001.
 */
export interface LeaseOptions { kind?: 'call' | 'socket' }

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
  /** Extension: the listening sockets right after the command, when CommandOptions.listening asked and the engine could say them. */
  listening?: ListeningSocket[]
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
