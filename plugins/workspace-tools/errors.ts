import { createError } from '@fastify/error'

/** A tool outcome the model should read as `Error: <message>` (bad path, unreadable file, failed write). */
export const WORKSPACE_FAILED = createError('WORKSPACE_FAILED', '%s', 422)
export const WORKSPACE_SANDBOX_STOPPED = createError('WORKSPACE_SANDBOX_STOPPED', 'the sandbox stopped while the %s was running', 503)
export const WORKSPACE_EXEC_TIMEOUT = createError('WORKSPACE_EXEC_TIMEOUT', '%s did not finish within %d seconds', 504)
