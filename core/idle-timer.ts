import type { EventEmitter } from 'node:events'

/*
 * net.Socket's idle timeout for socket look-alikes (the app proxy's connections into a sandbox, which
 * Node's http client and ws drive as sockets): 'timeout' once no byte went either way for that long.
 * One timer per socket, refreshed per chunk (no allocation per chunk).
 */
export class IdleTimer {
  private ms = 0
  private timer: NodeJS.Timeout | undefined
  /** the delay `timer` was made with */
  private timerMs = 0

  constructor (private readonly onIdle: () => void) {}

  /** A byte went either way: the clock starts again (nothing when no timeout is set). */
  touch (): void {
    if (this.ms <= 0) { this.stop(); return }
    if (this.timer !== undefined && this.timerMs === this.ms) { this.timer.refresh(); return }
    clearTimeout(this.timer)
    this.timerMs = this.ms
    this.timer = setTimeout(this.onIdle, this.ms)
    this.timer.unref()
  }

  stop (): void {
    clearTimeout(this.timer)
    this.timer = undefined
  }

  /**
   * socket.setTimeout(ms, callback) as net.Socket has it: 0 turns the timeout off and removes `callback`
   * (Node's http client relies on that for kept-alive sockets), else `callback` runs once at the timeout.
   */
  set (socket: EventEmitter & { destroyed: boolean }, ms: number, callback?: () => void): void {
    this.ms = ms
    if (callback !== undefined) {
      if (ms === 0) socket.removeListener('timeout', callback)
      else socket.once('timeout', callback)
    }
    if (socket.destroyed) this.stop()
    else this.touch()
  }
}
