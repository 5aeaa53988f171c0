import Type, { type Static } from 'typebox'

/**
 * Options of the terminal plugin, fed from AppConfig by fastify.config.ts. Everything after
 * `maxViewers` has a production default and exists for tests and tuning.
 */
export const TerminalOptions = Type.Object({
  cli: Type.Optional(Type.Union([Type.Literal('claude'), Type.Literal('codex'), Type.Literal('opencode')], { default: 'claude', description: 'SUBAGENT_CLI (already validated): SUBAGENT_CLI in the session environment' })),
  sessionEnv: Type.Optional(Type.Record(Type.String(), Type.String(), { default: {}, description: 'extra per-exec environment of terminal sessions; none by default: provider credentials never go to a terminal, whose tmux server any command in the sandbox can read' })),
  maxViewers: Type.Optional(Type.Integer({ default: 8, minimum: 1, maximum: 1000, description: 'TERMINAL_MAX_VIEWERS: open terminal WebSockets per chat' })),
  highWaterBytes: Type.Optional(Type.Integer({ default: 1048576, minimum: 1024, description: 'output bytes queued on one socket before its terminal stream is paused' })),
  lowWaterBytes: Type.Optional(Type.Integer({ default: 262144, minimum: 0, description: 'queued bytes below which a paused stream resumes' })),
  maxMessageBytes: Type.Optional(Type.Integer({ default: 1048576, minimum: 1024, description: 'largest client message (a paste); larger closes with 1009' })),
  initTimeoutMs: Type.Optional(Type.Integer({ default: 5000, minimum: 10, description: 'wait for the first (size) message before attaching at 80x24' })),
  probeTimeoutMs: Type.Optional(Type.Integer({ default: 10000, minimum: 100, description: 'limit of one status/start/stop/detach exec (tmux)' })),
  maxProbes: Type.Optional(Type.Integer({ default: 8, minimum: 1, description: 'tmux probe execs running at once, server-wide' })),
  killGraceMs: Type.Optional(Type.Integer({ default: 2000, minimum: 0, maximum: 10000, description: 'SIGTERM → SIGKILL delay of processes/{pid}/kill (passed to subAgent.kill)' }))
})
export type TerminalOptions = Static<typeof TerminalOptions>

export const ChatParams = Type.Object({ chat: Type.String() })
export type ChatParams = Static<typeof ChatParams>

export const KillParams = Type.Object({
  chat: Type.String({ description: 'the chat id (docs/contract.md#chat-id-validation)' }),
  pid: Type.String({ description: 'decimal integer from 2 to 4194304 (PID 1 is never killed); 400 bad_pid otherwise' })
})
export type KillParams = Static<typeof KillParams>

/** start-ttyd: a JSON object, or no body at all (400 bad_request for anything else). */
export const StartBody = Type.Union([
  Type.Object({ dangerous_mode: Type.Optional(Type.Boolean({ description: 'create session main with NO_AUTOSTART=1' })) }),
  Type.Null()
])
export type StartBody = Static<typeof StartBody>

export const StatusReply = Type.Object({
  active: Type.Boolean({ description: 'the sandbox runs and tmux session main exists' }),
  running: Type.Boolean({ description: 'extension: the sandbox runs (with or without session main)' }),
  container_stopped: Type.Optional(Type.Boolean()),
  meta_exists: Type.Optional(Type.Boolean())
})

export const StartReply = Type.Object({ started: Type.Boolean(), already_running: Type.Optional(Type.Boolean()) })
export const StopReply = Type.Object({ stopped: Type.Boolean() })
export const RestartReply = Type.Object({ restarted: Type.Boolean() })
export const ResurrectReply = Type.Object({ resurrected: Type.Boolean(), user_email: Type.Union([Type.String(), Type.Null()]) })
export const HeartbeatReply = Type.Object({ ok: Type.Boolean() })
export const KillReply = Type.Object({ killed: Type.Boolean(), pid: Type.Integer() })

export const SessionsReply = Type.Object({
  sessions: Type.Array(Type.Object({
    session_id: Type.String(),
    model: Type.Union([Type.String(), Type.Null()]),
    timestamp: Type.Integer({ description: 'Unix seconds' }),
    label: Type.String({ maxLength: 80 })
  }))
})

export const ProcessesReply = Type.Object({
  processes: Type.Array(Type.Object({
    pid: Type.Integer(),
    elapsed_minutes: Type.Integer(),
    command: Type.String({ maxLength: 100 })
  }))
})
