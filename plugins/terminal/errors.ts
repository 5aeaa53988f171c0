import { createError } from '@fastify/error'

/*
 * Coded errors of the terminal routes. The wire name is the code without its prefix, lowercased
 * (core/errors.ts): TERMINAL_NO_STOPPED_CONTAINER → `no_stopped_container` (docs/contract.md#terminal).
 */
export const TERMINAL_SANDBOX_NOT_RUNNING = createError('TERMINAL_SANDBOX_NOT_RUNNING', 'the sandbox of this chat is not running', 404)
export const TERMINAL_NO_STOPPED_CONTAINER = createError('TERMINAL_NO_STOPPED_CONTAINER', 'this chat has no stopped sandbox to restart', 404)
export const TERMINAL_CONTAINER_EXISTS = createError('TERMINAL_CONTAINER_EXISTS', 'this chat still has a sandbox; restart it instead', 409)
export const TERMINAL_NO_META = createError('TERMINAL_NO_META', 'this chat has no recorded sandbox to recreate', 404)
export const TERMINAL_BAD_REQUEST = createError('TERMINAL_BAD_REQUEST', '%s', 400)
export const TERMINAL_BAD_PID = createError('TERMINAL_BAD_PID', '%s', 400)
/** processes/{pid}/kill on a server without the sub-agent plugin: it knows no CLI, so no process is the CLI's. */
export const TERMINAL_NO_SUB_AGENT = createError('TERMINAL_NO_SUB_AGENT', 'this server has no sub-agent plugin, so no process is the CLI\'s to kill', 404)
export const TERMINAL_TOO_MANY_VIEWERS = createError('TERMINAL_TOO_MANY_VIEWERS', 'this chat already has %d open terminals', 429)
export const TERMINAL_UPGRADE_REQUIRED = createError('TERMINAL_UPGRADE_REQUIRED', 'this is a WebSocket endpoint (subprotocol tty)', 426)
export const TERMINAL_BAD_SUBPROTOCOL = createError('TERMINAL_BAD_SUBPROTOCOL', 'the WebSocket subprotocol must be tty', 400)
export const TERMINAL_SANDBOX_TIMEOUT = createError('TERMINAL_SANDBOX_TIMEOUT', 'the sandbox did not answer in time', 504)
/** restart/resurrect failed; `wireCode` names why (capacity_reached, image_missing, …), since 5xx bodies carry no detail. */
export const TERMINAL_START_FAILED = createError('TERMINAL_START_FAILED', 'the sandbox could not be started: %s', 500)
