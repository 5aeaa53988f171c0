import type { FastifyBaseLogger } from 'fastify'
import type { WebSocket } from 'ws'

/** GET /terminal/{chat}/status (surface.md §7.2) plus `running`, which tells "no sandbox" from "no session". */
export interface TerminalStatus {
  active: boolean
  running: boolean
  container_stopped?: true
  meta_exists?: true
}

/** One session of the active sub-agent CLI, read from its own session store inside the sandbox. */
export interface CliSession {
  session_id: string
  model: string | null
  /** Unix seconds (the session file's modification time) */
  timestamp: number
  /** ≤ 80 characters, single line */
  label: string
}

/** One process of the active sub-agent CLI (never PID 1, always the sandbox user's). */
export interface CliProcess {
  pid: number
  elapsed_minutes: number
  /** ≤ 100 characters, control characters removed */
  command: string
}

/**
 * The web terminal of a chat (surface.md §7.2): every viewer attaches its own TTY exec running
 * `tmux -u new-session -A -s main` as the sandbox user, so all viewers share tmux session `main`,
 * which outlives them. Nothing here creates or starts a sandbox except restart() and resurrect().
 * Errors are coded (TERMINAL_*; sandbox errors pass through with their SANDBOX_* codes).
 */
export interface TerminalService {
  /** Never starts anything; not activity. */
  status (chatId: string): Promise<TerminalStatus>
  /**
   * Ensures tmux session `main` exists; `dangerousMode` creates it with NO_AUTOSTART=1 (the shell
   * does not launch the CLI itself). Rejects TERMINAL_SANDBOX_NOT_RUNNING (404).
   */
  start (chatId: string, opts: { dangerousMode: boolean }): Promise<{ started: boolean }>
  /** Ends session `main` (its viewers are closed with 1000 "session ended"). Rejects TERMINAL_SANDBOX_NOT_RUNNING. */
  stop (chatId: string): Promise<void>
  /** Starts a stopped sandbox. Rejects TERMINAL_NO_STOPPED_CONTAINER (404), TERMINAL_START_FAILED (5xx). */
  restart (chatId: string): Promise<void>
  /**
   * Recreates a removed sandbox for the user recorded in meta.json. Rejects TERMINAL_CONTAINER_EXISTS (409),
   * TERMINAL_NO_META (404), TERMINAL_START_FAILED (5xx).
   */
  resurrect (chatId: string): Promise<{ userEmail: string | null }>
  /** The active CLI's sessions, newest first, ≤ 20; [] when it has none or the sandbox is not running. Not activity. */
  sessions (chatId: string): Promise<CliSession[]>
  /** The active CLI's processes, ≤ 10, answers reused for up to 2 s; [] when not running. Not activity. */
  processes (chatId: string): Promise<CliProcess[]>
  /**
   * SIGTERM to a process of the active CLI, SIGKILL after the grace period if it is still alive.
   * Rejects TERMINAL_BAD_PID (400) for anything but a current CLI process (never PID 1).
   */
  kill (chatId: string, pid: number): Promise<void>
  /** Records activity when the sandbox runs; never starts it. Resolves true when it runs. */
  heartbeat (chatId: string): Promise<boolean>
  /** Open viewers of the chat. */
  viewers (chatId: string): number
  /** Takes over an upgraded WebSocket (subprotocol `tty`, ttyd framing) as a viewer of the chat. */
  attach (chatId: string, socket: WebSocket, log: FastifyBaseLogger): void
}

declare module 'fastify' {
  interface FastifyInstance { terminal: TerminalService }
}
