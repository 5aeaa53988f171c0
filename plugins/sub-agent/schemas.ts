import Type, { type Static } from 'typebox'

const Cli = Type.Union([Type.Literal('claude'), Type.Literal('codex'), Type.Literal('opencode')])

/** Options of the sub-agent plugin; the environment-backed ones come from core/config.ts via fastify.config.ts. */
export const SubAgentOptions = Type.Object({
  cli: Cli,
  timeoutS: Type.Integer({ minimum: 1, description: 'SUB_AGENT_TIMEOUT: a run is sent SIGTERM after this many seconds, SIGKILL 10 s later.' }),
  maxTurns: Type.Integer({ minimum: 1, description: 'SUB_AGENT_MAX_TURNS: max_turns when the caller passes 0 or less.' }),
  createTimeoutS: Type.Integer({ minimum: 1, description: 'CONTAINER_CREATE_TIMEOUT: how long a call waits for its sandbox.' }),
  maxOutputChars: Type.Integer({ minimum: 1000, description: 'MAX_OUTPUT_CHARS: cap of the agent text in the result (half head, half tail).' }),
  progressIntervalS: Type.Integer({ minimum: 1, description: 'PROGRESS_INTERVAL_SECONDS: longest gap between progress notifications.' }),
  networkEnabled: Type.Boolean({ description: 'ENABLE_NETWORK: without network, opencode is told not to fetch its model catalogue or LSP servers.' }),
  cliEnv: Type.Record(Type.String(), Type.String(), {
    description: "The active CLI's allowlisted variables and the vision settings (subAgentEnvFromConfig); passed to every run, and only to runs: the container's own environment never has them."
  }),
  maxRunsPerChat: Type.Optional(Type.Integer({ minimum: 1, default: 1, description: 'Concurrent sub-agent runs per chat; excess calls get an isError result.' })),
  killGraceMs: Type.Optional(Type.Integer({ minimum: 0, default: 10000, description: 'SIGTERM → SIGKILL delay on timeout or cancellation (docs/contract.md#sub-agent-execution: 10 s).' })),
  processesCacheMs: Type.Optional(Type.Integer({ minimum: 0, maximum: 2000, default: 2000, description: 'How long a process listing for the terminal routes is reused (docs/contract.md#terminal: ≤ 2 s).' })),
  probeTimeoutMs: Type.Optional(Type.Integer({ minimum: 100, default: 10000, description: 'Bound on the helper execs that list sessions and processes.' }))
})
export type SubAgentOptions = Static<typeof SubAgentOptions>

/** docs/contract.md#input-schemas, property order as listed there. */
export const SubAgentInput = Type.Object({
  task: Type.String({
    description: 'The complete, self-contained task for the agent: goal, relevant files and paths, constraints, and how to check that it is done. ' +
      'The agent does not see this conversation. When resuming, the follow-up instruction.'
  }),
  description: Type.String({ description: 'What the agent is doing, in a few words; shown to the user while it runs.' }),
  model: Type.Optional(Type.String({ default: '', description: 'Model for the agent; empty uses the server default. The claude CLI accepts the aliases sonnet, opus and haiku.' })),
  max_turns: Type.Optional(Type.Integer({ default: 0, description: 'Most agent turns (enforced by the claude CLI only); 0 or less uses the server default.' })),
  working_directory: Type.Optional(Type.String({ default: '/home/assistant', description: 'Absolute path of an existing directory the agent works in.' })),
  resume_session_id: Type.Optional(Type.String({
    default: '',
    description: 'Session ID from an earlier sub_agent result: continues that session (its context and files) with this task. Empty starts a new session.'
  }))
})
export type SubAgentInput = Static<typeof SubAgentInput>
