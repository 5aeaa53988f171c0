import type { FastifyBaseLogger } from 'fastify'
import type { WebSocket } from 'ws'

/** GET /terminal/{chat}/status (docs/contract.md#terminal) plus `running`, which tells "no sandbox" from "no session". */
export interface TerminalStatus {
  active: boolean
  running: boolean
  container_stopped?: true
  meta_exists?: true
}

/**
 * The web terminal of a chat (docs/contract.md#terminal): every viewer attaches its own TTY exec running
 * `tmux -u new-session -A -s main` as the sandbox user, so all viewers share tmux session `main`,
 * which outlives them. Nothing here creates or starts a sandbox except restart() and resurrect().
 * The active CLI's sessions and processes are the sub-agent plugin's (`fastify.subAgent`).
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
