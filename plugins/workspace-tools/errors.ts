import { defineError, INTERNAL_ERROR } from '../../core/errors.js'

/** A tool outcome the model should read as `Error: <message>` (bad path, unreadable file, failed write). */
export const WORKSPACE_FAILED = defineError('WORKSPACE_FAILED', 'workspace_failed', '%s', 422)
export const WORKSPACE_SANDBOX_STOPPED = defineError('WORKSPACE_SANDBOX_STOPPED', INTERNAL_ERROR, 'the sandbox stopped while the %s was running', 503)
export const WORKSPACE_EXEC_TIMEOUT = defineError('WORKSPACE_EXEC_TIMEOUT', INTERNAL_ERROR, '%s did not finish within %d seconds', 504)
