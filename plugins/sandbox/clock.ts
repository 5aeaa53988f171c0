/*
 * The sandbox core's one clock (docs/engine.md#the-core-inside). Every instant the core stores or compares
 * (activity, deadlines, backoff, notices, leases, labels) is read from the Clock the service was built
 * with: the system clock by default, a movable one in tests (`now` of the plugin's options). Timers
 * (setTimeout) keep running on real time; engine-log.ts measures durations on the monotonic clock.
 */

export interface Clock {
  /** milliseconds since the epoch */
  now: () => number
}

export const systemClock: Clock = { now: () => Date.now() }

export const sleep = async (ms: number): Promise<void> => await new Promise(resolve => setTimeout(resolve, ms))

/** setTimeout fires at once beyond 2^31-1 ms: clamp (about 24.8 days). */
export const clampMs = (ms: number): number => Math.max(0, Math.min(ms, 2_147_483_647))

/** Arms an exec's timeout and abort signal (an already aborted signal fires at once); returns the disarm function. */
export function armDeadline (timeoutMs: number, signal: AbortSignal | undefined, onTimeout: () => void, onAbort: () => void): () => void {
  const timer = setTimeout(onTimeout, clampMs(timeoutMs))
  if (signal !== undefined) {
    if (signal.aborted) onAbort()
    else signal.addEventListener('abort', onAbort, { once: true })
  }
  return () => { clearTimeout(timer); signal?.removeEventListener('abort', onAbort) }
}
