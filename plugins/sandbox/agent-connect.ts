import { Duplex } from 'node:stream'
import type { Activity } from './activity.js'
import type { Agents } from './agent-client.js'
import type { AgentConnection } from './agent-connection.js'
import { CHUNK, decodeJson, encodeFrame, encodeJson, parseFailure, ProtocolError, T_ACK, T_CONNECT, T_CONNECTED, T_CREDIT, T_EXIT, T_FAIL, T_OUT, T_STDIN } from './agent-protocol.js'
import { armDeadline } from './clock.js'
import type { SandboxSocket } from './types.js'
import { IdleTimer } from '../../core/idle-timer.js'
import type { Recovery } from './recovery.js'

/*
 * TCP connections to the sandbox's loopback through cubicle-agent (sandbox-image/agent/cubicle_connect.py):
 * one CONNECT request per connection, multiplexed on the agent's stream, so that a connection costs a
 * frame instead of an exec. Flow control per connection both ways (a window of CONNECT_WINDOW bytes):
 * the agent sends the app's bytes only while the server has acknowledged them (ACK, sent as the reader
 * consumes), and the server sends the client's bytes only as the agent reports them written (CREDIT).
 * So a connection buffers at most a window plus the reader's high-water mark, a slow reader stalls only
 * its own connection, and what the agent sends beyond the window, or credits beyond what it got, is a
 * protocol violation that closes the agent stream. These bytes are exempt from the stream's byte budget
 * (AgentConnection.exempt): their rate is the reader's own.
 */

/** Bytes in flight each way per connection (the agent clamps it to 64 KiB–4 MiB). */
export const CONNECT_WINDOW = 1024 * 1024
/** An ACK is sent once this much was consumed (or when the reader asks for more with at least this much unacknowledged). */
const ACK_AT = CONNECT_WINDOW / 4

/** CONNECT failed: the agent's errno (ECONNREFUSED 111 when nothing listens on either loopback address). */
export class AgentConnectError extends Error {
  override name = 'AgentConnectError'
  constructor (readonly errno: number, message: string) { super(message) }
  get code (): string { return this.errno === 111 ? 'ECONNREFUSED' : this.errno === 110 ? 'ETIMEDOUT' : 'ECONNFAILED' }
}

/**
 * The app's end as a socket: the agent's connection with both windows, destroyed when either side ends,
 * with net.Socket's idle timeout (Node's http client uses it as it is, docs/performance.md (k)).
 */
export class AgentTcpSocket extends Duplex implements SandboxSocket {
  private readonly idle = new IdleTimer(() => { this.emit('timeout') })
  /** the app's bytes received and not acknowledged yet */
  private unacked = 0
  /** the client's bytes sent and not credited yet */
  private unwritten = 0
  /** a write waiting for credit */
  private waiting: { chunk: Buffer, done: (err?: Error | null) => void } | null = null
  /** the agent ended the connection (EXIT): no CLOSE is due */
  ended = false

  constructor (private readonly conn: AgentConnection, public id: number) {
    super({ allowHalfOpen: false })
  }

  /** An OUT frame: the app's bytes (Protocol error beyond the window). */
  received (payload: Buffer): void {
    this.unacked += payload.length
    if (this.unacked > CONNECT_WINDOW) throw new ProtocolError('connection data beyond the window')
    this.conn.exempt += payload.length
    if (this.destroyed) return
    this.idle.touch()
    if (this.push(payload) && this.unacked >= ACK_AT) this.ack()
  }

  /** A CREDIT frame: the agent wrote that much to the app (Protocol error for more than was sent). */
  credited (payload: Buffer): void {
    if (payload.length !== 4) throw new ProtocolError('bad CREDIT')
    const n = payload.readUInt32BE(0)
    if (n > this.unwritten) throw new ProtocolError('credit for bytes never sent')
    this.unwritten -= n
    const w = this.waiting
    if (w !== null) { this.waiting = null; this.send(w.chunk, w.done) }
  }

  /**
   * The agent ended the connection (the app closed it, or the agent gave up on it): what arrived before
   * is still read (an answer followed by the app's close may come in one chunk with the EXIT), then the
   * stream ends and destroys itself; writes from now on are dropped.
   */
  agentEnded (): void {
    this.ended = true
    const w = this.waiting
    this.waiting = null
    w?.done()
    this.push(null)
  }

  private ack (): void {
    const head = Buffer.allocUnsafe(4)
    head.writeUInt32BE(this.unacked, 0)
    this.unacked = 0
    this.conn.send(encodeFrame(this.id, T_ACK, head))
  }

  override _read (): void {
    if (this.unacked >= ACK_AT) this.ack()
  }

  override _write (chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    this.send(chunk, done)
  }

  /** Sends as much of `chunk` as the window allows, in frames of at most CHUNK; the rest waits for credit. */
  private send (chunk: Buffer, done: (err?: Error | null) => void): void {
    let at = 0
    if (this.ended) { done(); return }
    this.idle.touch()
    while (at < chunk.length) {
      if (this.destroyed || this.conn.closed) { done(new Error('the connection is closed')); return }
      const room = CONNECT_WINDOW - this.unwritten
      if (room <= 0) { this.waiting = { chunk: chunk.subarray(at), done }; return }
      const piece = chunk.subarray(at, at + Math.min(room, CHUNK))
      this.unwritten += piece.length
      this.conn.send(encodeFrame(this.id, T_STDIN, piece))
      at += piece.length
    }
    done()
  }

  override _final (done: (err?: Error | null) => void): void { done() }

  override _destroy (err: Error | null, done: (err?: Error | null) => void): void {
    this.idle.stop()
    const w = this.waiting
    this.waiting = null
    w?.done(err ?? new Error('the connection is closed'))
    if (!this.ended) this.conn.finish(this.id)
    done(err)
  }

  setTimeout (ms: number, callback?: () => void): this {
    this.idle.set(this, ms, callback)
    return this
  }

  // What Node's http client calls on a net.Socket; the agent's connection sets TCP_NODELAY on its own side.
  setNoDelay (): this { return this }
  setKeepAlive (): this { return this }
  ref (): this { return this }
  unref (): this { return this }
}

/**
 * One CONNECT request (exported for tests): the socket once the agent connected, AgentConnectError when it
 * could not (nothing listens), undefined when the agent stream was lost first (the caller falls back).
 */
export async function connectRequest (conn: AgentConnection, port: number, opts: { timeoutMs: number }): Promise<AgentTcpSocket | undefined> {
  return await new Promise<AgentTcpSocket | undefined>((resolve, reject) => {
    let socket: AgentTcpSocket | null = null
    let settled = false
    const disarm = armDeadline(opts.timeoutMs, undefined, () => {
      if (settled) return
      settled = true
      conn.finish(id)
      reject(new AgentConnectError(110, `no connection to port ${port} within ${opts.timeoutMs} ms`))
    }, () => {})
    const id: number = conn.request(i => encodeJson(i, T_CONNECT, { port, window: CONNECT_WINDOW }), {
      frame: (type, payload) => {
        if (socket === null) {
          if (type === T_CONNECTED) {
            decodeJson(payload)
            socket = new AgentTcpSocket(conn, id)
            if (settled) { socket.destroy(); return }
            settled = true
            disarm()
            resolve(socket)
            return
          }
          if (type === T_FAIL) {
            const f = parseFailure(decodeJson(payload))
            if (!settled) { settled = true; disarm(); reject(new AgentConnectError(f.errno, f.error)) }
            return
          }
          throw new ProtocolError(`frame type ${type} before CONNECTED`)
        }
        if (type === T_OUT) { socket.received(payload); return }
        if (type === T_CREDIT) { socket.credited(payload); return }
        if (type === T_EXIT) { socket.agentEnded(); return }
        if (type === T_FAIL) { socket.ended = true; socket.destroy(new Error('the agent dropped the connection')); return }
        throw new ProtocolError(`frame type ${type} in a connection`)
      },
      lost: () => {
        if (socket !== null) { socket.ended = true; socket.destroy(new Error('the agent stream was lost')); return }
        if (!settled) { settled = true; disarm(); resolve(undefined) }
      }
    })
  })
}

export type Connect = (chatId: string, port: number, opts: { timeoutMs: number }) => Promise<SandboxSocket | undefined>

/** SandboxService.connect: holds a lease while connecting; undefined = no agent now (the caller relays through exec). */
export function createConnect (d: { recovery: Pick<Recovery, 'runningEntry'>, activity: Pick<Activity, 'holdLease'>, agents: Pick<Agents, 'agentFor'> }): Connect {
  return async (chatId, port, opts) => {
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new RangeError(`port ${port} is not a TCP port`)
    const entry = await d.recovery.runningEntry(chatId)
    const release = d.activity.holdLease(entry)
    try {
      const conn = await d.agents.agentFor(entry)
      if (conn === null || !conn.canConnect) return undefined
      return await connectRequest(conn, port, opts)
    } finally { release() }
  }
}
