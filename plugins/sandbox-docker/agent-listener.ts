import { chmod, unlink, type FileHandle } from 'node:fs/promises'
import { createServer, type Socket } from 'node:net'
import { SOCKET_NAME, type RunDirs } from './agent-run-dir.js'
import type { Slot } from './agent-slot.js'

/*
 * Listening on a sandbox's `agent.sock` (docs/engine.md#the-agent-socket): bound through an O_NOFOLLOW
 * descriptor of the run directory's `s/` (`/proc/self/fd/N/agent.sock`), connectable by the sandbox's
 * user (the directory is read-only to it and mounted into that sandbox only). A sandbox that connects
 * more than ACCEPTS times in ACCEPT_WINDOW_MS stops being listened to for COOLDOWN_MS: a connect loop
 * costs the server little and only that sandbox's agent (it uses exec meanwhile).
 */

/** How long a channel request waits for an agent expected back (after a drop, or when listening anew): its retries top at 2 s. */
export const RECONNECT_WAIT_MS = 2500
const ACCEPTS = 20
const ACCEPT_WINDOW_MS = 10_000
const COOLDOWN_MS = 30_000

export interface ListenerLog { warn: (obj: object, msg: string) => void }

export class SlotListener {
  /** `onConnection` gets every connection the rate limit lets through (paused: nothing is read before the greeting). */
  constructor (private readonly dirs: RunDirs, private readonly log: ListenerLog, private readonly onConnection: (s: Slot, sock: Socket) => void) {}

  /** Listens on the sandbox's socket unless it does already; false when its run directory is not ours (or cooling down). */
  async listen (s: Slot): Promise<boolean> {
    if (s.server !== null) return true
    if (s.gone || s.foreign || s.cooling !== undefined) return false
    s.listening ??= this.bind(s).finally(() => { s.listening = null })
    return await s.listening
  }

  stop (s: Slot): void {
    const { server, dir } = s
    s.server = null
    s.dir = null
    // close() unlinks the socket through /proc/self/fd/N: the descriptor is closed only after it.
    server?.close()
    void dir?.close().catch(() => {})
  }

  private async bind (s: Slot): Promise<boolean> {
    let dir: FileHandle
    try { dir = await this.dirs.openSocketDir(s.token) } catch { s.foreign = true; return false }
    const path = `/proc/self/fd/${dir.fd}/${SOCKET_NAME}`
    const server = createServer({ pauseOnConnect: true }, sock => { this.accept(s, sock) })
    try {
      // A socket left by a former server process: only the server ever writes in this directory.
      await unlink(path).catch(() => {})
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject)
        server.listen(path, () => { server.off('error', reject); resolve() })
      })
      // Connectable by the sandbox's user (the directory is read-only to it, and mounted into that sandbox only).
      await chmod(path, 0o666)
    } catch (err) {
      server.close()
      await dir.close()
      this.log.warn({ err, sandboxId: s.id }, 'cannot listen on the sandbox agent socket; its agent runs over exec')
      return false
    }
    if (s.gone) { server.close(); await dir.close(); return false }
    server.on('error', () => {})
    s.server = server
    s.dir = dir
    if (s.key !== null || !s.keyLoaded) s.expectUntil = Date.now() + RECONNECT_WAIT_MS
    return true
  }

  private accept (s: Slot, sock: Socket): void {
    sock.on('error', () => {})
    const now = Date.now()
    s.accepts = s.accepts.filter(t => now - t < ACCEPT_WINDOW_MS)
    s.accepts.push(now)
    if (s.accepts.length > ACCEPTS) {
      sock.destroy()
      this.coolDown(s)
      return
    }
    this.onConnection(s, sock)
  }

  private coolDown (s: Slot): void {
    if (s.cooling !== undefined) return
    this.log.warn({ sandboxId: s.id }, 'too many connections to a sandbox agent socket; not listening for a while')
    this.stop(s)
    s.cooling = setTimeout(() => { s.cooling = undefined }, COOLDOWN_MS)
    s.cooling.unref()
  }
}
