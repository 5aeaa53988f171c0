import type { SubagentCli } from '../../core/config.js'

/** One session of the active CLI, read from its own store in the sandbox (GET /terminal/{chat}/sessions, docs/contract.md#terminal). */
export interface CliSession {
  /** The id `resume_session_id` takes (^[A-Za-z0-9_.:-]{1,128}$). */
  session_id: string
  model: string | null
  /** Unix seconds of the last change. */
  timestamp: number
  /** ≤ 80 characters, one line, control characters removed. */
  label: string
}

/** One process of the active CLI (GET /terminal/{chat}/processes, docs/contract.md#terminal). Never PID 1; always the sandbox user's. */
export interface CliProcess {
  pid: number
  elapsed_minutes: number
  /** ≤ 100 characters, control characters removed. */
  command: string
}

/** A sub_agent run in progress (what the server itself started). */
export interface ActiveRun {
  runId: string
  /** Unix ms */
  startedAt: number
  description: string
}

/**
 * The sub-agent CLI's knowledge that other plugins need (the terminal routes of docs/contract.md#terminal list and kill
 * the **active** CLI's sessions and processes through it). Nothing here creates or starts a sandbox,
 * and none of it counts as activity. Errors are coded: SUB_AGENT_BAD_PID (400),
 * SUB_AGENT_SANDBOX_NOT_RUNNING (404); sandbox errors pass through with their SANDBOX_* codes.
 */
export interface SubAgentService {
  /** SUBAGENT_CLI. */
  readonly cli: SubagentCli
  /**
   * The active CLI's sessions, newest first, at most 20; [] when the sandbox is not running or the CLI
   * has none. claude: ~/.claude/projects/<project>/<id>.jsonl; codex: ~/.codex/sessions/**\/rollout-*-<id>.jsonl;
   * opencode: its SQLite store ~/.local/share/opencode/opencode.db (read with the image's python3), or the
   * JSON store of older releases. Everything read is untrusted and bounded.
   */
  sessions (chatId: string): Promise<CliSession[]>
  /** The active CLI's processes in pid order, at most 10; [] when not running. Answers are reused for up to 2 s. */
  processes (chatId: string): Promise<CliProcess[]>
  /**
   * True when a command line (ps `args`, arguments separated by single spaces) is the active CLI itself:
   * its binary by base name (`claude …`, `/opt/…/codex …`), or node/bun running the CLI's package script.
   */
  isCliProcess (cmdline: string): boolean
  /**
   * SIGTERM to a current process of the active CLI, then SIGKILL when it is still alive after `graceMs`
   * (default 2,000). The wait happens inside the sandbox, never on the event loop. Rejects
   * SUB_AGENT_BAD_PID for anything else (PID 1, another program, a pid that went away) and
   * SUB_AGENT_SANDBOX_NOT_RUNNING when the sandbox does not run. A sub_agent run whose CLI is killed
   * this way returns `**Sub-Agent Terminated** (terminated by SIGTERM)` (or SIGKILL).
   */
  kill (chatId: string, pid: number, opts?: { graceMs?: number }): Promise<{ killed: true, pid: number, signal: 'TERM' | 'KILL' }>
  /** The chat's sub_agent calls in progress on this server. */
  runs (chatId: string): ActiveRun[]
}

declare module 'fastify' {
  interface FastifyInstance { subAgent: SubAgentService }
}
