/*
 * One WebSocket relayed to an app in a sandbox: the browser's socket (accepted by the route) on one
 * side, a ws client over an exec relay on the other. Messages keep their kind; each direction pauses
 * its source while more than the high-water mark is queued towards the other; either side closing
 * closes the other (the app's code passed on when it may be sent); an app that never completes the
 * handshake closes the browser's socket with 1011; no message for the idle timeout closes both (1001).
 */
import WebSocket from 'ws'
import type { OutgoingHttpHeaders } from 'node:http'
import type { AppConnection } from './connection.js'

export interface SocketLimits { maxMessageBytes: number, highWaterBytes: number, handshakeTimeoutMs: number, idleTimeoutMs: number }

const UNSENDABLE = new Set([1004, 1005, 1006, 1015])
/** The app's close code as the browser may receive it, else 1011. */
export function browserCode (code: number): number {
  if (code >= 3000 && code <= 4999) return code
  return code >= 1000 && code <= 1014 && !UNSENDABLE.has(code) ? code : 1011
}

const bytes = (data: WebSocket.RawData): number => Array.isArray(data) ? data.reduce((n, b) => n + b.length, 0) : (data as Buffer | ArrayBuffer).byteLength

function forward (from: WebSocket, to: WebSocket, high: number, touch: () => void): (data: WebSocket.RawData, binary: boolean) => void {
  let queued = 0
  let paused = false
  return (data, binary) => {
    touch()
    if (to.readyState !== WebSocket.OPEN) return
    const size = bytes(data)
    queued += size
    to.send(data, { binary }, () => {
      queued -= size
      if (paused && queued <= high / 2) { paused = false; from.resume() }
    })
    if (!paused && queued > high) { paused = true; from.pause() }
  }
}

export interface RelayTarget { port: number, path: string, headers: OutgoingHttpHeaders, protocol: string }

/** Relays `browser` to the app until either side closes; `onClosed` runs once, afterwards. Returns the close function. */
export function relaySocket (browser: WebSocket, connection: AppConnection, target: RelayTarget, limits: SocketLimits, onClosed: () => void): (code: number, reason: string) => void {
  const app = new WebSocket(`ws://127.0.0.1:${target.port}${target.path}`, target.protocol === '' ? [] : [target.protocol], {
    createConnection: (() => connection) as unknown as NonNullable<WebSocket.ClientOptions['createConnection']>,
    headers: target.headers as Record<string, string>,
    maxPayload: limits.maxMessageBytes,
    handshakeTimeout: limits.handshakeTimeoutMs,
    perMessageDeflate: false,
    followRedirects: false
  })
  let closed = false
  let opened = false
  let idle: NodeJS.Timeout | undefined
  const touch = (): void => {
    clearTimeout(idle)
    idle = setTimeout(() => { close(1001, 'idle') }, limits.idleTimeoutMs)
    idle.unref()
  }
  // Messages the browser sends before the app accepted wait here, bounded.
  let early: Array<[WebSocket.RawData, boolean]> = []
  let earlyBytes = 0
  let toApp: ((data: WebSocket.RawData, binary: boolean) => void) | undefined

  const close = (code: number, reason: string): void => {
    if (closed) return
    closed = true
    clearTimeout(idle)
    early = []
    if (browser.readyState === WebSocket.OPEN || browser.readyState === WebSocket.CONNECTING) browser.close(code, reason)
    if (app.readyState !== WebSocket.CLOSED) app.terminate()
    connection.destroy()
    onClosed()
  }

  browser.on('message', (data, binary) => {
    if (closed) return
    if (toApp !== undefined) { toApp(data, binary); return }
    earlyBytes += bytes(data)
    if (earlyBytes > limits.highWaterBytes) { close(1008, 'too much data before the app answered'); return }
    early.push([data, binary])
  })
  browser.on('close', () => { close(1000, 'closed') })
  browser.on('error', () => { close(1011, 'browser socket error') })
  app.on('open', () => {
    opened = true
    toApp = forward(browser, app, limits.highWaterBytes, touch)
    app.on('message', forward(app, browser, limits.highWaterBytes, touch))
    for (const [data, binary] of early) toApp(data, binary)
    early = []
    touch()
  })
  app.on('close', (code: number) => { close(opened ? browserCode(code) : 1011, opened ? 'the app closed the connection' : 'the app refused the WebSocket') })
  app.on('error', (err: Error & { code?: string }) => {
    close(err.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH' ? 1009 : 1011, 'app socket error')
  })
  app.on('unexpected-response', () => { close(1011, 'the app refused the WebSocket') })
  touch()
  return close
}
