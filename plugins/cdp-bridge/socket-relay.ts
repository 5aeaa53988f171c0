/*
 * One relayed CDP connection: the viewer's WebSocket on one side, the backend WebSocket to the target
 * inside the sandbox (over an exec relay) on the other (docs/contract.md#browser). Text and binary
 * messages keep their kind; each direction has its own backpressure (a side whose queue towards the
 * other passes the high-water mark is paused until the queue drains below half of it); either side
 * closing closes the other; a backend that never opens closes the viewer with 1011.
 */
import type { Duplex } from 'node:stream'
import type { FastifyBaseLogger } from 'fastify'
import { connectBackend, relayArgv, relayPipe, WebSocket } from './cdp-client.js'
import type { SandboxService } from '../sandbox/types.js'

export interface RelayOptions {
  port: number
  maxMessageBytes: number
  highWaterBytes: number
  connectTimeoutMs: number
}

export interface RelayDeps { sandbox: SandboxService, log: FastifyBaseLogger }

/** A live relay; `close` is idempotent and also runs when either side closes on its own. */
export interface SocketRelay { close: (code: number, reason: string) => void }

const UNSENDABLE = new Set([1004, 1005, 1006, 1015])
/** The code to pass on to the viewer: the backend's when it may be sent, else 1011. */
export function viewerCode (backendCode: number): number {
  if (backendCode >= 3000 && backendCode <= 4999) return backendCode
  if (backendCode >= 1000 && backendCode <= 1014 && !UNSENDABLE.has(backendCode)) return backendCode
  return 1011
}

const sizeOf = (data: WebSocket.RawData): number =>
  Array.isArray(data) ? data.reduce((n, b) => n + b.length, 0) : (data as Buffer | ArrayBuffer).byteLength

/** Sends with per-direction accounting; pauses `source` while more than `high` bytes are queued. */
function pump (source: WebSocket, target: WebSocket, high: number): (data: WebSocket.RawData, isBinary: boolean) => void {
  let queued = 0
  let paused = false
  return (data, isBinary) => {
    if (target.readyState !== WebSocket.OPEN) return
    const size = sizeOf(data)
    queued += size
    target.send(data, { binary: isBinary }, () => {
      queued -= size
      if (paused && queued <= high / 2) { paused = false; source.resume() }
    })
    if (!paused && queued > high) { paused = true; source.pause() }
  }
}

/** Both sockets of one relayed connection and their shared fate. */
class Relay implements SocketRelay {
  private backend: WebSocket | undefined
  private pipe: Duplex | undefined
  private opened = false
  private closed = false
  private toBackend: ((data: WebSocket.RawData, isBinary: boolean) => void) | undefined
  // Messages the viewer sends before the backend is open wait here, bounded.
  private early: Array<[WebSocket.RawData, boolean]> = []
  private earlyBytes = 0
  private readonly log: FastifyBaseLogger

  constructor (private readonly deps: RelayDeps, private readonly opts: RelayOptions, private readonly client: WebSocket, private readonly onClosed: () => void, chatId: string, targetId: string) {
    this.log = deps.log.child({ chatId, targetId })
    client.on('message', (data, isBinary) => { this.fromViewer(data, isBinary) })
    client.on('close', () => { this.close(1000, 'viewer closed') })
    client.on('error', err => { this.log.debug({ err }, 'viewer socket error') })
  }

  start (openStream: NonNullable<SandboxService['openStream']>, chatId: string, targetId: string): void {
    openStream.call(this.deps.sandbox, chatId, relayArgv(this.opts.port)).then(stream => {
      if (this.closed) { stream.close(); return }
      this.pipe = relayPipe(stream)
      this.attach(connectBackend(this.pipe, { port: this.opts.port, targetId, maxPayload: this.opts.maxMessageBytes, handshakeTimeout: this.opts.connectTimeoutMs }))
    }, (err: unknown) => {
      this.log.debug({ err }, 'relay to the browser could not be opened')
      this.close(1011, 'browser unavailable')
    })
  }

  private fromViewer (data: WebSocket.RawData, isBinary: boolean): void {
    if (this.closed) return
    if (this.toBackend !== undefined) { this.toBackend(data, isBinary); return }
    this.earlyBytes += sizeOf(data)
    if (this.earlyBytes > this.opts.highWaterBytes) { this.close(1008, 'too much data before the browser answered'); return }
    this.early.push([data, isBinary])
  }

  private attach (b: WebSocket): void {
    this.backend = b
    b.on('open', () => {
      this.opened = true
      this.toBackend = pump(this.client, b, this.opts.highWaterBytes)
      b.on('message', pump(b, this.client, this.opts.highWaterBytes))
      for (const [data, isBinary] of this.early) this.toBackend(data, isBinary)
      this.early = []
      this.log.debug('browser socket relayed')
    })
    b.on('close', (code: number) => {
      if (!this.opened) this.close(1011, 'browser unavailable')
      else this.close(viewerCode(code), 'browser closed the connection')
    })
    b.on('error', (err: Error & { code?: string }) => {
      this.log.debug({ err }, 'backend socket error')
      // ws reports its own 1009 as an error; its close event then carries 1006.
      if (err.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') this.close(1009, 'message too big')
    })
  }

  close (code: number, reason: string): void {
    if (this.closed) return
    this.closed = true
    this.early = []
    const { client, backend } = this
    if (client.readyState === WebSocket.OPEN || client.readyState === WebSocket.CONNECTING) client.close(code, reason)
    if (backend !== undefined && backend.readyState !== WebSocket.CLOSED) backend.terminate()
    this.pipe?.destroy()
    this.log.debug({ code, reason }, 'browser socket closed')
    this.onClosed()
  }
}

/** Relays `client` to the target until either side closes; `onClosed` runs once, afterwards. */
export function startRelay (deps: RelayDeps, opts: RelayOptions, chatId: string, targetId: string, client: WebSocket, onClosed: () => void): SocketRelay {
  const openStream = deps.sandbox.openStream
  if (openStream === undefined) throw new TypeError('the sandbox driver has no openStream()')
  const relay = new Relay(deps, opts, client, onClosed, chatId, targetId)
  relay.start(openStream, chatId, targetId)
  return relay
}
