import type { ToolCallContext } from '../mcp-transport/types.js'

/*
 * Progress of a run (docs/contract.md#sub-agent-execution): `progress` = elapsed seconds, `total` = the timeout,
 * message `<latest action> (<elapsed>)` or `Agent running... (<elapsed>)`. A new action is reported
 * at the next whole second (so at most one notification per second and `progress` always grows); with
 * nothing new, one goes out every interval. The first comes after one second. stop() ends it for good.
 */

export interface RunProgress {
  /** The CLI's latest action, as its event stream reveals it. */
  action: (text: string) => void
  /** The latest action seen, if any. */
  last: () => string | undefined
  stop: () => void
}

/** `45s`, `3m 07s`, `1h 02m`. */
export function formatElapsed (seconds: number): string {
  const s = Math.max(0, Math.floor(seconds))
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`
  return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`
}

export interface ProgressOptions {
  intervalS: number
  totalS: number
  /** Injectable clock (tests). */
  now?: () => number
  tickMs?: number
}

export function startRunProgress (ctx: Pick<ToolCallContext, 'progress' | 'wantsProgress'>, opts: ProgressOptions): RunProgress {
  const now = opts.now ?? Date.now
  const started = now()
  let latest: string | undefined
  let fresh = false
  let lastSent = 0
  let stopped = false
  const tick = (): void => {
    if (stopped) return
    const elapsed = Math.floor((now() - started) / 1000)
    if (elapsed <= lastSent) return
    if (!fresh && lastSent !== 0 && elapsed - lastSent < opts.intervalS) return
    lastSent = elapsed
    fresh = false
    ctx.progress(elapsed, opts.totalS, `${latest ?? 'Agent running...'} (${formatElapsed(elapsed)})`).catch(() => {})
  }
  const timer = ctx.wantsProgress ? setInterval(tick, opts.tickMs ?? 250) : undefined
  timer?.unref()
  return {
    action (text) {
      if (text === latest) return
      latest = text
      fresh = true
    },
    last: () => latest,
    stop () {
      stopped = true
      if (timer !== undefined) clearInterval(timer)
    }
  }
}
