/*
 * Connections to an app inside a sandbox: a TCP connection the in-sandbox agent opens on the sandbox's
 * loopback (SandboxService.connect, one frame on the agent's stream), or, where the agent cannot serve,
 * an exec relay (`socat` with stdin attached), either seen as a socket, so Node's http client and ws do
 * the protocol work on what the sandbox sends (bounded header parsing, chunking, framing), never our own
 * parser. One keep-alive agent per chat pools them (even the agent's connect is a round trip; a reused
 * connection nothing), caps them per chat and queues what is over the cap.
 */
import { Agent, type AgentOptions, type ClientRequestArgs } from 'node:http'
import { Duplex } from 'node:stream'
import type { SandboxStream } from '../sandbox/types.js'

/**
 * argv of the relay inside the sandbox: 127.0.0.1, then ::1 (an app listening only on IPv6 loopback);
 * the first attempt's complaint is dropped so that the second one's tells what happened.
 */
export const relayArgv = (port: number): string[] => ['sh', '-c', 'socat - "TCP4:127.0.0.1:$1,nodelay" 2>/dev/null || exec socat - "TCP6:[::1]:$1,nodelay"', 'relay', String(port)]

/**
 * A connection to an app as a net.Socket look-alike with a working idle timeout (setTimeout emits
 * 'timeout' after that long without a byte either way, as net.Socket does), over the in-sandbox agent's
 * connection (agent()) or an exec relay (relay()). Backpressure both ways; destroying it closes the
 * connection inside the sandbox.
 */
export class AppSocket extends Duplex {
  private idleMs = 0
  private timer: NodeJS.Timeout | undefined
  /** the delay `timer` was made with */
  private timerMs = 0
  /** the relay's complaint (socat's stderr), first 300 bytes: tells "nothing listens" from a broken answer */
  complaint = ''

  private constructor (private readonly inner: Duplex, private readonly closeInner: () => void) {
    super({ allowHalfOpen: false })
    inner.once('end', () => { this.push(null) })
    inner.once('close', () => { this.push(null); this.destroy() })
    inner.once('error', err => { this.destroy(err) })
  }

  /** Over the agent's TCP connection (SandboxService.connect). */
  static agent (inner: Duplex): AppSocket {
    const s = new AppSocket(inner, () => { inner.destroy() })
    inner.on('data', (data: Buffer) => { s.received(data) })
    return s
  }

  /**
   * Over an exec relay: its stdin is never ended on its own (socat drops the connection half a second
   * after EOF); closing the exec ends socat and its TCP connection.
   */
  static relay (stream: SandboxStream): AppSocket {
    const s = new AppSocket(stream.socket, () => { stream.close() })
    stream.demux(data => { s.received(data) }, data => { if (s.complaint.length < 300) s.complaint += data.toString('utf8', 0, 300 - s.complaint.length) })
    return s
  }

  private received (data: Buffer): void {
    this.arm()
    if (!this.push(data)) this.inner.pause()
  }

  override _read (): void { this.inner.resume() }

  override _write (chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    this.arm()
    this.inner.write(chunk, err => { done(err ?? null) })
  }

  override _final (done: (err?: Error | null) => void): void { done() }

  override _destroy (err: Error | null, done: (err?: Error | null) => void): void {
    clearTimeout(this.timer)
    this.closeInner()
    done(err)
  }

  /** (Re)starts the idle clock: one timer per connection, refreshed per chunk (no allocation per chunk). */
  private arm (): void {
    if (this.idleMs <= 0 || this.destroyed) { clearTimeout(this.timer); this.timer = undefined; return }
    if (this.timer !== undefined && this.timerMs === this.idleMs) { this.timer.refresh(); return }
    clearTimeout(this.timer)
    this.timerMs = this.idleMs
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

  // What http calls on a net.Socket; the relays set TCP_NODELAY on their own side.
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
