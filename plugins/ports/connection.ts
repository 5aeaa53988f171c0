/*
 * Connections to an app inside a sandbox: each one is an exec relay (`socat - TCP:127.0.0.1:<port>`
 * with stdin attached) seen as a socket, so Node's http client and ws do the protocol work on what
 * the sandbox sends (bounded header parsing, chunking, framing), never our own parser. One keep-alive
 * agent per chat pools them (an exec costs tens of milliseconds; a reused connection nothing), caps
 * them per chat and queues what is over the cap.
 */
import { Agent, type AgentOptions, type ClientRequestArgs } from 'node:http'
import { Duplex } from 'node:stream'
import type { SandboxStream } from '../sandbox/types.js'

/** argv of the relay inside the sandbox. */
export const relayArgv = (port: number): string[] => ['socat', '-', `TCP:127.0.0.1:${port},nodelay`]

/**
 * The relay's output and stdin as a net.Socket look-alike with a working idle timeout (setTimeout
 * emits 'timeout' after that long without a byte either way, as net.Socket does). Backpressure both
 * ways; stdin is never ended on its own (socat drops the connection half a second after EOF);
 * destroying it closes the exec, which ends socat and its TCP connection.
 */
export class AppSocket extends Duplex {
  private idleMs = 0
  private timer: NodeJS.Timeout | undefined
  /** the relay's complaint (socat's stderr), first 300 bytes: tells "nothing listens" from a broken answer */
  complaint = ''

  constructor (private readonly stream: SandboxStream) {
    super({ allowHalfOpen: false })
    const socket = stream.socket
    stream.demux(data => {
      this.arm()
      if (!this.push(data)) socket.pause()
    }, data => { if (this.complaint.length < 300) this.complaint += data.toString('utf8', 0, 300 - this.complaint.length) })
    socket.once('end', () => { this.push(null) })
    socket.once('close', () => { this.push(null); this.destroy() })
    socket.once('error', err => { this.destroy(err) })
  }

  override _read (): void { this.stream.socket.resume() }

  override _write (chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    this.arm()
    this.stream.socket.write(chunk, err => { done(err ?? null) })
  }

  override _final (done: (err?: Error | null) => void): void { done() }

  override _destroy (err: Error | null, done: (err?: Error | null) => void): void {
    clearTimeout(this.timer)
    this.stream.close()
    done(err)
  }

  private arm (): void {
    clearTimeout(this.timer)
    if (this.idleMs <= 0 || this.destroyed) return
    this.timer = setTimeout(() => { this.emit('timeout') }, this.idleMs)
    this.timer.unref()
  }

  /** As net.Socket's: 0 turns the timeout off and removes `callback` (Node's http client relies on that for kept-alive sockets). */
  setTimeout (ms: number, callback?: () => void): this {
    this.idleMs = ms
    if (callback !== undefined) {
      if (ms === 0) this.removeListener('timeout', callback)
      else this.once('timeout', callback)
    }
    this.arm()
    return this
  }

  // What http calls on a net.Socket; an exec relay has no such knobs.
  setNoDelay (): this { return this }
  setKeepAlive (): this { return this }
  ref (): this { return this }
  unref (): this { return this }
}

export type Connect = (port: number) => Promise<AppSocket>

/** A chat's keep-alive agent whose connections are exec relays into its sandbox. */
export class SandboxAgent extends Agent {
  constructor (private readonly connect: Connect, opts: AgentOptions) { super(opts) }

  // Node's Agent accepts a connection handed to the callback later (an exec takes a while to open).
  override createConnection (options: ClientRequestArgs, callback?: (err: Error | null, stream: Duplex) => void): undefined {
    this.connect(Number(options.port)).then(socket => { callback?.(null, socket) }, (err: Error) => { callback?.(err, undefined as unknown as Duplex) })
    return undefined
  }

  /** Requests waiting for a connection (over the per-chat cap). */
  queued (): number {
    let n = 0
    for (const list of Object.values(this.requests)) n += list?.length ?? 0
    return n
  }
}
