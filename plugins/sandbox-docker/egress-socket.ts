import type { FileHandle } from 'node:fs/promises'
import { chmod, unlink } from 'node:fs/promises'
import { createServer, type Server, type Socket } from 'node:net'
import type { RunDirs } from './agent-run-dir.js'

/*
 * Egress over the agent socket's run directory (docs/network.md#egress-over-the-agent-socket): a sandbox
 * created with no network interface reaches the server's egress proxy through `egress.sock`, beside
 * `agent.sock` in its run directory's `s/` (read-only to the sandbox, mounted into that sandbox only), where
 * its agent relays 127.0.0.1:<EGRESS_PORT> (sandbox-image/agent/cubicle_egress.py). The socket is bound the
 * way agent.sock is: through an O_NOFOLLOW descriptor of `s/` (`/proc/self/fd/N/egress.sock`). Which
 * sandbox a connection belongs to is which socket accepted it, never anything the sandbox sends. Each
 * accepted connection goes, with the sandbox's id, to the handler the core registered; at most
 * MAX_OPEN of one sandbox are open at once (Node closes more at accept, before reading a byte), so a
 * connect flood costs a bounded number of sockets before the proxy's own slots see any.
 */

export const EGRESS_SOCKET_NAME = 'egress.sock'
/** Open connections of one sandbox's egress socket; the proxy's per-chat slots (EGRESS_MAX_CONNECTIONS_PER_CHAT) bound them further. */
export const MAX_OPEN = 256

export type EgressHandler = (sandboxId: string, socket: Socket) => void

export interface EgressSocketLog { warn: (obj: object, msg: string) => void }

interface Bound { token: string, server: Server, dir: FileHandle }

export class EgressSockets {
  private readonly bound = new Map<string, Bound>()
  private readonly binding = new Map<string, Promise<boolean>>()
  private handler: EgressHandler | null = null
  private closed = false

  constructor (private readonly dirs: RunDirs, private readonly log: EgressSocketLog) {}

  /** Starts handing connections to `handler` (sandboxes listened for from now on). */
  serve (handler: EgressHandler): void { this.handler = handler }

  get serving (): boolean { return this.handler !== null }

  /** Listens on the sandbox's egress socket unless it does already; false when it cannot (not serving, a run directory not ours). */
  async listen (id: string, token: string): Promise<boolean> {
    if (this.handler === null || this.closed) return false
    const b = this.bound.get(id)
    if (b !== undefined && b.token === token) return true
    if (b !== undefined) this.stop(id)
    let p = this.binding.get(id)
    if (p === undefined) {
      p = this.bind(id, token).finally(() => { this.binding.delete(id) })
      this.binding.set(id, p)
    }
    return await p
  }

  stop (id: string): void {
    // A bind still under way (a listing noted the sandbox as it was being removed) is undone once it is done.
    void this.binding.get(id)?.then(ok => { if (ok) this.stop(id) })
    const b = this.bound.get(id)
    if (b === undefined) return
    this.bound.delete(id)
    // close() unlinks the socket through /proc/self/fd/N: the descriptor is closed only after it.
    b.server.close(() => { void b.dir.close().catch(() => {}) })
  }

  close (): void {
    this.closed = true
    for (const id of [...this.bound.keys()]) this.stop(id)
  }

  private async bind (id: string, token: string): Promise<boolean> {
    let dir: FileHandle
    try { dir = await this.dirs.openSocketDir(token) } catch { return false }
    const path = `/proc/self/fd/${dir.fd}/${EGRESS_SOCKET_NAME}`
    const server = createServer(sock => {
      sock.on('error', () => {})
      const handler = this.handler
      if (handler === null || this.bound.get(id)?.server !== server) { sock.destroy(); return }
      handler(id, sock)
    })
    server.maxConnections = MAX_OPEN
    try {
      // A socket left by a former server process: only the server ever writes in this directory.
      await unlink(path).catch(() => {})
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject)
        server.listen({ path, backlog: 64 }, () => { server.off('error', reject); resolve() })
      })
      // Connectable by the sandbox's user (the directory is read-only to it, and mounted into that sandbox only).
      await chmod(path, 0o666)
    } catch (err) {
      server.close()
      await dir.close()
      this.log.warn({ err, sandboxId: id }, 'cannot listen on the sandbox egress socket; the sandbox has no way out until its next start')
      return false
    }
    if (this.closed) { server.close(); await dir.close(); return false }
    server.on('error', () => {})
    this.bound.set(id, { token, server, dir })
    return true
  }
}
