/*
 * One relayed CDP connection: the viewer's WebSocket on one side, the backend WebSocket to the target
 * inside the sandbox (over an exec relay) on the other (surface.md §7.1 item 2). Text and binary
 * messages keep their kind; each direction has its own backpressure (a side whose queue towards the
 * other passes the high-water mark is paused until the queue drains below half of it); either side
 * closing closes the other; a backend that never opens closes the viewer with 1011.
 */
import type { Duplex } from 'node:stream'
import type { FastifyBaseLogger } from 'fastify'
import { connectBackend, relayArgv, relayPipe, WebSocket } from './cdp-client.js'
import type { SandboxService } from '../sandbox-docker/types.js'

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

export function startRelay (deps: RelayDeps, opts: RelayOptions, chatId: string, targetId: string, client: WebSocket, onClosed: () => void): SocketRelay {
  const log = deps.log.child({ chatId, targetId })
  let backend: WebSocket | undefined
  let pipe: Duplex | undefined
  let opened = false
  let closed = false
  // Messages the viewer sends before the backend is open wait here, bounded.
  let early: Array<[WebSocket.RawData, boolean]> = []
  let earlyBytes = 0

  const close = (code: number, reason: string): void => {
    if (closed) return
    closed = true
    early = []
    if (client.readyState === WebSocket.OPEN || client.readyState === WebSocket.CONNECTING) client.close(code, reason)
    if (backend !== undefined && backend.readyState !== WebSocket.CLOSED) backend.terminate()
    pipe?.destroy()
    log.debug({ code, reason }, 'browser socket closed')
    onClosed()
  }

  client.on('message', (data, isBinary) => {
    if (closed) return
    if (opened) return toBackend?.(data, isBinary)
    earlyBytes += sizeOf(data)
    if (earlyBytes > opts.highWaterBytes) { close(1008, 'too much data before the browser answered'); return }
    early.push([data, isBinary])
  })
  client.on('close', () => { close(1000, 'viewer closed') })
  client.on('error', err => { log.debug({ err }, 'viewer socket error') })

  let toBackend: ((data: WebSocket.RawData, isBinary: boolean) => void) | undefined
  const openStream = deps.sandbox.openStream
  if (openStream === undefined) { close(1011, 'browser unavailable'); return { close } }
  openStream.call(deps.sandbox, chatId, relayArgv(opts.port)).then(stream => {
    if (closed) { stream.close(); return }
    pipe = relayPipe(stream)
    const b = connectBackend(pipe, { port: opts.port, targetId, maxPayload: opts.maxMessageBytes, handshakeTimeout: opts.connectTimeoutMs })
    backend = b
    b.on('open', () => {
      opened = true
      toBackend = pump(client, b, opts.highWaterBytes)
      b.on('message', pump(b, client, opts.highWaterBytes))
      for (const [data, isBinary] of early) toBackend(data, isBinary)
      early = []
      log.debug('browser socket relayed')
    })
    b.on('close', (code: number) => {
      if (!opened) close(1011, 'browser unavailable')
      else close(viewerCode(code), 'browser closed the connection')
    })
    b.on('error', (err: Error & { code?: string }) => {
      log.debug({ err }, 'backend socket error')
      // ws reports its own 1009 as an error; its close event then carries 1006.
      if (err.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') close(1009, 'message too big')
    })
  }, (err: unknown) => {
    log.debug({ err }, 'relay to the browser could not be opened')
    close(1011, 'browser unavailable')
  })
  return { close }
}
