import { createError } from '@fastify/error'

/** A sub_agent outcome the model reads as `Error: <message>` (bad working_directory, busy chat, missing CLI). */
export const SUB_AGENT_FAILED = createError('SUB_AGENT_FAILED', '%s', 422)
/** The pid is not a current process of the active CLI (docs/contract.md#terminal kill route: 400). */
export const SUB_AGENT_BAD_PID = createError('SUB_AGENT_BAD_PID', '%s', 400)
/** Listing or killing needs a running sandbox; nothing is started for it. */
export const SUB_AGENT_SANDBOX_NOT_RUNNING = createError('SUB_AGENT_SANDBOX_NOT_RUNNING', 'the sandbox is not running', 404)
/** A listing or kill helper in the sandbox did not finish within probeTimeoutMs (a hostile or stuck sandbox). */
export const SUB_AGENT_SANDBOX_TIMEOUT = createError('SUB_AGENT_SANDBOX_TIMEOUT', 'the sandbox did not answer in time', 504)
