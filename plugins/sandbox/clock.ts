/*
 * The sandbox core's one clock (docs/engine.md#the-core-inside): every time the core reads comes from the
 * Clock the service was built with, never from Date.now(). It has two readings, because a test moves
 * the first and must not move the second. engine-log.ts measures durations on the monotonic clock.
 */

export interface Clock {
  /**
   * The core's time (ms since the epoch): what it keeps and compares over a sandbox's life — activity and
   * idle time, age and creation labels, meta.json and records, the prefix lease. The plugin's `now`
   * option replaces it (tests move it to reach an idle stop or a maximum age without waiting).
   */
  now: () => number
  /**
   * Real time (ms since the epoch, as timers run): deadlines handed to the engine and the windows of its
   * events (the engine compares them with its own clock), waits that sleep between attempts, backoff,
   * and the order of events within a call (notices against the start of a sandbox). Never moved: a wait
   * on real timers measured by a moved clock would end at once or never.
   */
  real: () => number
}

export const systemClock: Clock = { now: () => Date.now(), real: () => Date.now() }

/** The system clock with the core's time read from `now` (the plugin's option). */
export const clockWith = (now: () => number): Clock => ({ now, real: systemClock.real })

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
