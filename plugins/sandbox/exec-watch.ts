import { armDeadline } from './clock.js'
import type { CoreBase } from './context.js'
import type { ExecProcess } from './engine-types.js'
import { outputClosed } from './process-socket.js'

/*
 * Watching a process until it ends, times out or is cancelled: the one skeleton of bash_tool's streamed
 * command (command.ts), the collecting exec (exec-collect.ts) and both over the in-sandbox agent
 * (agent-exec.ts). The watch ends once (`finish`): its timers and the deadline are disarmed and the
 * caller's own clean-up runs. On timeout or abort `stop` starts the kill path and says how long the
 * watch may still wait for the end; the watch then ends at that time at the latest.
 */

/** Result deadline after a SIGTERM (at least SIGKILL + 5 s). */
export const RESULT_GRACE_MS = 10_000

/** How long to wait for the end after the kill path started with this SIGKILL delay. */
export const resultGrace = (killDelayMs: number): number => Math.max(RESULT_GRACE_MS, killDelayMs + 5000)

/** How a watch ended. */
export interface WatchEnd { timedOut: boolean, cancelled: boolean }

/** The watch as its caller drives it. */
export interface Watch extends WatchEnd {
  done: boolean
  /** Ends the watch now (once; later calls do nothing). */
  finish: () => void
  /** Ends the watch `ms` from now at the latest. */
  finishIn: (ms: number) => void
}

export interface WatchOptions {
  timeoutMs: number
  signal?: AbortSignal
  /** Timeout or abort: starts the kill path; returns how long to wait for the end, or null to end at once. */
  stop: () => number | null
  /** A timeout that comes when this is true is ignored (bash_tool: bash exited already, only its output is awaited). */
  pastTimeout?: () => boolean
  /** Runs once when the watch ends, before it resolves. */
  onFinish?: () => void
}

/**
 * Watches until `finish()` (called by what `setup` wires, or by the grace after a timeout or abort).
 * `setup` runs at once, before the deadline is armed (an aborted signal stops at once).
 */
export async function watchUntil (o: WatchOptions, setup: (w: Watch) => void): Promise<WatchEnd> {
  return await new Promise<WatchEnd>(resolve => {
    const timers: NodeJS.Timeout[] = []
    let disarm = (): void => {}
    const w: Watch = {
      timedOut: false,
      cancelled: false,
      done: false,
      finish: () => {
        if (w.done) return
        w.done = true
        for (const t of timers) clearTimeout(t)
        disarm()
        o.onFinish?.()
        resolve({ timedOut: w.timedOut, cancelled: w.cancelled })
      },
      finishIn: ms => { if (!w.done) timers.push(setTimeout(w.finish, ms)) }
    }
    setup(w)
    const stop = (): void => {
      const wait = o.stop()
      if (wait === null) w.finish()
      else w.finishIn(wait)
    }
    disarm = armDeadline(o.timeoutMs, o.signal,
      () => { if (!w.done && !w.cancelled && o.pastTimeout?.() !== true) { w.timedOut = true; stop() } },
      () => { if (!w.done && !w.timedOut && !w.cancelled) { w.cancelled = true; stop() } })
  })
}

/** How long an exec may show no output before the engine is asked whether its process started (a saturated sandbox). */
export const STALL_MS = 2000

/**
 * A start that hangs: when no output arrived within STALL_MS, asks the engine whether the process
 * exists yet; one that does not (the runtime still tries to start it: no pid or memory left) calls
 * `onStalled`. Returns the disarm function.
 */
export function watchStart (proc: ExecProcess, seen: () => boolean, onStalled: () => void): () => void {
  let off = false
  const timer = setTimeout(() => {
    if (off || seen()) return
    proc.started().then(started => { if (!off && !started) onStalled() }, () => {})
  }, STALL_MS)
  timer.unref()
  return () => { off = true; clearTimeout(timer) }
}

/** Arms a stall check (watchStart) given whether any output was seen; returns its disarm function. */
export type StallWatch = (seen: () => boolean) => () => void

/** How a process's watch ended: `seen` when any byte of output arrived. */
export interface ProcessEnd extends WatchEnd { seen: boolean }

/**
 * watchUntil for an engine process: it also ends when both output streams closed; the process is one
 * of the service's open streams (closed at shutdown) while watched and is closed when the watch ends;
 * `stall` watches for a start that hangs.
 */
export async function watchProcess (base: Pick<CoreBase, 'streams'>, proc: ExecProcess, o: WatchOptions & { stall?: StallWatch },
  setup: (w: Watch) => void = () => {}): Promise<ProcessEnd> {
  base.streams.add(proc)
  let seen = false
  let unwatch = (): void => {}
  const end = await watchUntil({
    ...o,
    onFinish: () => {
      unwatch()
      o.onFinish?.()
      base.streams.delete(proc)
      proc.close()
    }
  }, w => {
    const saw = (): void => { seen = true }
    proc.stdout.once('data', saw)
    proc.stderr.once('data', saw)
    void outputClosed(proc).then(w.finish)
    setup(w)
    if (o.stall !== undefined && !w.done) unwatch = o.stall(() => seen)
  })
  return { ...end, seen }
}
