import type Docker from 'dockerode'
import { toDockerError } from './docker-error.js'

/*
 * What every part of the Docker adapter shares: the dockerode instance, the per-request time bound
 * and the wrapper that turns any failure into a DockerError.
 */

/** Per-request bound for control-plane calls (streams have none). */
export const CALL_TIMEOUT_MS = 30_000

export interface AdapterContext {
  docker: Docker
  /** an abort signal that fires after `ms` */
  signal: (ms?: number) => AbortSignal
  /** request options with that signal (dockerode's typings omit abortSignal on most option objects; a non-literal `{}` passes it through) */
  opt: (extra?: Record<string, unknown>, ms?: number) => {}
  /** runs one request; any failure becomes a DockerError naming `what` */
  call: <T>(what: string, fn: () => Promise<T>) => Promise<T>
}

export function adapterContext (docker: Docker): AdapterContext {
  const signal = (ms = CALL_TIMEOUT_MS): AbortSignal => AbortSignal.timeout(ms)
  return {
    docker,
    signal,
    opt: (extra = {}, ms = CALL_TIMEOUT_MS) => ({ ...extra, abortSignal: signal(ms) }),
    async call (what, fn) {
      try { return await fn() } catch (err) { throw toDockerError(err, what) }
    }
  }
}
