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
import type { SandboxSocket, SandboxStream } from '../sandbox/types.js'
import { IdleTimer } from '../../core/idle-timer.js'

/**
 * argv of the relay inside the sandbox: 127.0.0.1, then ::1 (an app listening only on IPv6 loopback);
 * the first attempt's complaint is dropped so that the second one's tells what happened.
 */
export const relayArgv = (port: number): string[] => ['sh', '-c', 'socat - "TCP4:127.0.0.1:$1,nodelay" 2>/dev/null || exec socat - "TCP6:[::1]:$1,nodelay"', 'relay', String(port)]

/**
 * What the proxy relays over: the agent's connection (SandboxService.connect, used as it is: no wrapper
 * between it and Node's http client) or an exec relay (AppSocket); `complaint` only on the relay.
 */
export type AppConnection = SandboxSocket & { complaint?: string }

/**
 * An exec relay as a net.Socket look-alike with a working idle timeout (setTimeout emits 'timeout'
 * after that long without a byte either way, as net.Socket does). Backpressure both ways; destroying it
 * closes the exec, which ends socat and its TCP connection inside the sandbox. Its stdin is never ended
 * on its own (socat drops the connection half a second after EOF).
 */
export class AppSocket extends Duplex implements SandboxSocket {
  private readonly idle = new IdleTimer(() => { this.emit('timeout') })
  /** the relay's complaint (socat's stderr), first 300 bytes: tells "nothing listens" from a broken answer */
  complaint = ''

  private constructor (private readonly stream: SandboxStream) {
    super({ allowHalfOpen: false })
    const inner = stream.socket
    inner.once('end', () => { this.push(null) })
    inner.once('close', () => { this.push(null); this.destroy() })
    inner.once('error', err => { this.destroy(err) })
    stream.demux(data => { this.received(data) }, data => { if (this.complaint.length < 300) this.complaint += data.toString('utf8', 0, 300 - this.complaint.length) })
  }

  static relay (stream: SandboxStream): AppSocket { return new AppSocket(stream) }

  private received (data: Buffer): void {
    if (!this.destroyed) this.idle.touch()
    if (!this.push(data)) this.stream.socket.pause()
  }

  override _read (): void { this.stream.socket.resume() }

  override _write (chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    this.idle.touch()
    this.stream.socket.write(chunk, err => { done(err ?? null) })
  }

  override _final (done: (err?: Error | null) => void): void { done() }

  override _destroy (err: Error | null, done: (err?: Error | null) => void): void {
    this.idle.stop()
    this.stream.close()
    done(err)
  }

  setTimeout (ms: number, callback?: () => void): this {
    this.idle.set(this, ms, callback)
    return this
  }

  // What http calls on a net.Socket; socat sets TCP_NODELAY on its own side.
  setNoDelay (): this { return this }
  setKeepAlive (): this { return this }
  ref (): this { return this }
  unref (): this { return this }
}

export type Connect = (port: number) => Promise<AppConnection>

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
