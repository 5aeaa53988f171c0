import { defineError, INTERNAL_ERROR } from '../../core/errors.js'

/*
 * Coded errors of the sandbox contract (types.ts). Their messages are model-facing: tools render them
 * as `Error: <message>`, so they never carry host paths, addresses or engine internals. The engine is
 * named by its own label (SandboxEngine.label: 'the Docker engine', 'Docker'), so the words users saw
 * with Docker are unchanged. The four a person can act on (timeout, image, capacity, engine) have wire
 * codes of their own although they are 5xx; the others answer internal_error with a log reference.
 */
export const SANDBOX_CREATE_TIMEOUT = defineError('SANDBOX_CREATE_TIMEOUT', 'create_timeout', 'sandbox creation timed out (%ss)', 504)
export const SANDBOX_IMAGE_MISSING = defineError('SANDBOX_IMAGE_MISSING', 'image_missing',
  "the sandbox image '%s' is missing on the %s host; build it with `npm run sandbox:build`", 503)
export const SANDBOX_CAPACITY = defineError('SANDBOX_CAPACITY', 'capacity_reached', 'sandbox capacity reached', 503)
export const SANDBOX_ENGINE_UNAVAILABLE = defineError('SANDBOX_ENGINE_UNAVAILABLE', 'docker_unavailable', '%s is not reachable; try again shortly', 503)
export const SANDBOX_NOT_RUNNING = defineError('SANDBOX_NOT_RUNNING', 'not_running', 'the sandbox is not running', 409)
export const SANDBOX_FAILED = defineError('SANDBOX_FAILED', INTERNAL_ERROR, 'the sandbox could not be started: %s', 500)
export const SANDBOX_PUT_FAILED = defineError('SANDBOX_PUT_FAILED', INTERNAL_ERROR, 'cannot write %s: %s', 500)
/**
 * Not a coded error: the server refuses to run sandboxes on what it found (an unsafe network, another
 * instance holding the prefix). The message is for the operator (boot fails with it, the log repeats
 * it); callers of the contract see SANDBOX_FAILED pointing at the log.
 */
export class SandboxSetupRefused extends Error {
  override name = 'SandboxSetupRefused'
}
export const SANDBOX_ENGINE_BUSY = defineError('SANDBOX_ENGINE_BUSY', INTERNAL_ERROR,
  'the sandbox engine is busy with other chats and did not answer in time; try the call again in a moment', 503)
