import { defineError, INTERNAL_ERROR } from '../../core/errors.js'

/** A sub_agent outcome the model reads as `Error: <message>` (bad working_directory, busy chat, missing CLI). */
export const SUB_AGENT_FAILED = defineError('SUB_AGENT_FAILED', 'sub_agent_failed', '%s', 422)
/** The pid is not a current process of the active CLI (the kill route of docs/contract.md#terminal answers it as is). */
export const SUB_AGENT_BAD_PID = defineError('SUB_AGENT_BAD_PID', 'bad_pid', '%s', 400)
/** Listing or killing needs a running sandbox; nothing is started for it. */
export const SUB_AGENT_SANDBOX_NOT_RUNNING = defineError('SUB_AGENT_SANDBOX_NOT_RUNNING', 'sandbox_not_running', 'the sandbox of this chat is not running', 404)
/** A listing or kill helper in the sandbox did not finish within probeTimeoutMs (a hostile or stuck sandbox). */
export const SUB_AGENT_SANDBOX_TIMEOUT = defineError('SUB_AGENT_SANDBOX_TIMEOUT', INTERNAL_ERROR, 'the sandbox did not answer in time', 504)
