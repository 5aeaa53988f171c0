import type { Readable, Writable } from 'node:stream'

/*
 * The engine contract's processes (engine-types.ts): what an exec asks for and the started process
 * the engine answers with.
 */

export interface ExecSpec {
  argv: string[]
  user?: string
  cwd?: string
  /** `KEY=value` entries */
  env?: string[]
  /** attach stdin (ExecProcess.stdin is writable; end() closes the process's stdin) */
  stdin?: boolean
  tty?: boolean
  /** the caller's cancellation: also ends the wait for an exec slot */
  signal?: AbortSignal
  /** absolute deadline (ms, Date.now clock) for the wait and the set-up: the caller's own timeout */
  deadline?: number
}

/** Output stream ids of an exec: 1 stdout, 2 stderr. */
export type ExecOutput = 1 | 2

/** How a process ended, as far as the engine knows. */
export interface ExecExit {
  /**
   * Its exit status; null when unknown: the output was lost, the caller closed the process before it
   * ended, the sandbox stopped under it, or it never started.
   */
  code: number | null
  /** The engine never started it (the sandbox had no process or memory left): nothing of it ran. */
  notStarted: boolean
  /**
   * Never started because the sandbox was not running any more (killed or stopped while the exec was set
   * up; implies notStarted): the core starts it again and runs the call once more. Optional for engines.
   */
  notRunning?: boolean
}

/** Signals a caller may send to a process. */
export type ExecSignal = 'HUP' | 'INT' | 'TERM' | 'KILL'

/**
 * A started process. Its output arrives on `stdout` and `stderr` (with a TTY everything is stdout
 * and stderr only ends): read both, a stream left paused holds the process's output back as far as
 * the engine can. How the bytes travel (Docker's attach framing, a websocket, a pipe) is the
 * engine's business.
 */
export interface ExecProcess {
  /** The process's stdin when ExecSpec.stdin (end() closes it); null otherwise. */
  readonly stdin: Writable | null
  readonly stdout: Readable
  readonly stderr: Readable
  /**
   * Settles (never rejects) once the output streams ended and the engine knows how the process
   * ended, or right after close(). The engine waits for a status it reports late.
   */
  readonly exit: Promise<ExecExit>
  /** Whether the process exists yet: false while the engine still tries to start it (no process or memory left). */
  started: () => Promise<boolean>
  /** The TTY's size (no-op without a TTY). */
  resize: (cols: number, rows: number) => Promise<void>
  /** Sends `signal` to the process and to the processes it started that kept its environment. */
  signal: (signal: ExecSignal) => Promise<void>
  /** Detaches: ends the streams (the process gets EOF or SIGHUP as the engine delivers it); `exit` then settles at once. */
  close: () => void
}
