import { createError } from '@fastify/error'

/*
 * Coded errors of the sandbox contract (types.ts). Their messages are model-facing: tools render them
 * as `Error: <message>`, so they never carry host paths, addresses or engine internals. The engine is
 * named by its own label (SandboxEngine.label: 'the Docker engine', 'Docker'), so the words users saw
 * with Docker are unchanged.
 */
export const SANDBOX_CREATE_TIMEOUT = createError('SANDBOX_CREATE_TIMEOUT', 'sandbox creation timed out (%ss)', 504)
export const SANDBOX_IMAGE_MISSING = createError('SANDBOX_IMAGE_MISSING',
  "the sandbox image '%s' is missing on the %s host; build it with `npm run sandbox:build`", 503)
export const SANDBOX_CAPACITY = createError('SANDBOX_CAPACITY', 'sandbox capacity reached', 503)
export const SANDBOX_ENGINE_UNAVAILABLE = createError('SANDBOX_ENGINE_UNAVAILABLE', '%s is not reachable; try again shortly', 503)
export const SANDBOX_NOT_RUNNING = createError('SANDBOX_NOT_RUNNING', 'the sandbox is not running', 409)
export const SANDBOX_FAILED = createError('SANDBOX_FAILED', 'the sandbox could not be started: %s', 500)
export const SANDBOX_PUT_FAILED = createError('SANDBOX_PUT_FAILED', 'cannot write %s: %s', 500)
/**
 * Not a coded error: the server refuses to run sandboxes on what it found (an unsafe network, another
 * instance holding the prefix). The message is for the operator (boot fails with it, the log repeats
 * it); callers of the contract see SANDBOX_FAILED pointing at the log.
 */
export class SandboxSetupRefused extends Error {
  override name = 'SandboxSetupRefused'
}
export const SANDBOX_ENGINE_BUSY = createError('SANDBOX_ENGINE_BUSY',
  'the sandbox engine is busy with other chats and did not answer in time; try the call again in a moment', 503)
