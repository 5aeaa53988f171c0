import { defineError, INTERNAL_ERROR } from '../../core/errors.js'

/* Errors of the terminal routes (docs/contract.md#terminal); docs/errors.md lists them with their wire codes. */
export const TERMINAL_SANDBOX_NOT_RUNNING = defineError('TERMINAL_SANDBOX_NOT_RUNNING', 'sandbox_not_running', 'the sandbox of this chat is not running', 404)
export const TERMINAL_NO_STOPPED_CONTAINER = defineError('TERMINAL_NO_STOPPED_CONTAINER', 'no_stopped_container', 'this chat has no stopped sandbox to restart', 404)
export const TERMINAL_CONTAINER_EXISTS = defineError('TERMINAL_CONTAINER_EXISTS', 'container_exists', 'this chat still has a sandbox; restart it instead', 409)
export const TERMINAL_NO_META = defineError('TERMINAL_NO_META', 'no_meta', 'this chat has no recorded sandbox to recreate', 404)
export const TERMINAL_BAD_REQUEST = defineError('TERMINAL_BAD_REQUEST', 'bad_request', '%s', 400)
export const TERMINAL_BAD_PID = defineError('TERMINAL_BAD_PID', 'bad_pid', '%s', 400)
/** processes/{pid}/kill on a server without the sub-agent plugin: it knows no CLI, so no process is the CLI's. */
export const TERMINAL_NO_SUB_AGENT = defineError('TERMINAL_NO_SUB_AGENT', 'no_sub_agent', 'this server has no sub-agent plugin, so no process is the CLI\'s to kill', 404)
export const TERMINAL_TOO_MANY_VIEWERS = defineError('TERMINAL_TOO_MANY_VIEWERS', 'too_many_viewers', 'this chat already has %d open terminals', 429)
export const TERMINAL_UPGRADE_REQUIRED = defineError('TERMINAL_UPGRADE_REQUIRED', 'upgrade_required', 'this is a WebSocket endpoint (subprotocol tty)', 426)
export const TERMINAL_BAD_SUBPROTOCOL = defineError('TERMINAL_BAD_SUBPROTOCOL', 'bad_subprotocol', 'the WebSocket subprotocol must be tty', 400)
export const TERMINAL_SANDBOX_TIMEOUT = defineError('TERMINAL_SANDBOX_TIMEOUT', INTERNAL_ERROR, 'the sandbox did not answer in time', 504)
/**
 * restart/resurrect failed for a reason the log has (its status follows the cause's). A sandbox error
 * with a wire code of its own (capacity_reached, image_missing, …) is answered as itself instead.
 */
export const TERMINAL_START_FAILED = defineError('TERMINAL_START_FAILED', 'start_failed', 'the sandbox could not be started: %s', 500)
