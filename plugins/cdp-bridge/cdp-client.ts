/*
 * The one adapter to the browser inside a sandbox (and the only importer of `ws`): a byte pipe over an
 * exec relay (`socat - TCP:127.0.0.1:<port>` with stdin attached, docs/contract.md#isolation), HTTP GET of the
 * DevTools JSON endpoints over that pipe, and the backend WebSocket of a relayed CDP connection. Node's
 * http client and ws do the protocol work on the pipe: header limits, chunking, framing and close codes
 * come from them, not from hand parsing of what a hostile sandbox sends.
 */
import { Duplex } from 'node:stream'
import { request } from 'node:http'
import type { Socket } from 'node:net'
import WebSocket from 'ws'
import type { SandboxStream } from '../sandbox/types.js'

/** argv of the relay process inside the sandbox. */
export const relayArgv = (port: number): string[] => ['socat', '-', `TCP:127.0.0.1:${port},nodelay`]

/**
 * The relay's stdout/stdin as a socket-like Duplex. Backpressure both ways: reads pause the exec stream
 * while the consumer is full, writes complete when the exec stream accepted them. stdin is never ended
 * on its own (socat would drop the connection half a second after EOF); destroying the pipe closes the
 * exec stream, which ends socat and with it the TCP connection.
 */
class RelayPipe extends Duplex {
  constructor (private readonly stream: SandboxStream) {
    super({ allowHalfOpen: false })
    const socket = stream.socket
    stream.demux(data => { if (!this.push(data)) socket.pause() }, () => { /* socat's own complaints are not data */ })
    socket.once('end', () => { this.push(null) })
    socket.once('close', () => { this.push(null); this.destroy() })
    socket.once('error', err => { this.destroy(err) })
  }

  override _read (): void { this.stream.socket.resume() }

  override _write (chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    this.stream.socket.write(chunk, err => { done(err ?? null) })
  }

  override _final (done: (err?: Error | null) => void): void { done() }

  override _destroy (err: Error | null, done: (err?: Error | null) => void): void {
    this.stream.close()
    done(err)
  }

  // What http and ws call on a net.Socket; an exec stream has no such knobs.
  setNoDelay (): this { return this }
  setKeepAlive (): this { return this }
  setTimeout (): this { return this }
  ref (): this { return this }
  unref (): this { return this }
}

export function relayPipe (stream: SandboxStream): Duplex { return new RelayPipe(stream) }

export interface GetJsonOptions { port: number, path: string, maxBytes: number, signal: AbortSignal }

/**
 * GET `path` from the browser's HTTP endpoint through the pipe and parse the JSON body. Rejects on a
 * status other than 200, a body over `maxBytes` (read stops there), malformed JSON or an abort. The
 * pipe is destroyed when the call settles.
 */
export async function getJson (pipe: Duplex, opts: GetJsonOptions): Promise<unknown> {
  return await new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port: opts.port,
      path: opts.path,
      method: 'GET',
      // Chromium answers only requests whose Host is an IP address or localhost.
      headers: { Host: `127.0.0.1:${opts.port}`, Accept: 'application/json', Connection: 'close' },
      createConnection: () => pipe as unknown as Socket,
      maxHeaderSize: 16 * 1024,
      signal: opts.signal
    })
    const fail = (err: Error): void => { pipe.destroy(); reject(err) }
    req.once('error', fail)
    req.once('response', res => {
      if (res.statusCode !== 200) { res.resume(); fail(new Error(`the browser answered HTTP ${res.statusCode ?? '?'}`)); return }
      const chunks: Buffer[] = []
      let size = 0
      res.on('data', (chunk: Buffer) => {
        size += chunk.length
        if (size > opts.maxBytes) { res.destroy(); fail(new Error(`the answer exceeds ${opts.maxBytes} bytes`)); return }
        chunks.push(chunk)
      })
      res.once('error', fail)
      res.once('end', () => {
        pipe.destroy()
        try { resolve(JSON.parse(Buffer.concat(chunks).toString('utf8'))) } catch { reject(new Error('the answer is not JSON')) }
      })
    })
    req.end()
  })
}

export interface BackendOptions { port: number, targetId: string, maxPayload: number, handshakeTimeout: number }

/** The CDP WebSocket to one target inside the sandbox, over the pipe. Emits what ws emits. */
export function connectBackend (pipe: Duplex, opts: BackendOptions): WebSocket {
  return new WebSocket(`ws://127.0.0.1:${opts.port}/devtools/page/${opts.targetId}`, {
    createConnection: (() => pipe) as unknown as NonNullable<WebSocket.ClientOptions['createConnection']>,
    maxPayload: opts.maxPayload,
    handshakeTimeout: opts.handshakeTimeout,
    perMessageDeflate: false,
    followRedirects: false,
    // No Origin: Chromium refuses WebSocket clients that send one unless --remote-allow-origins allows it.
    headers: { Host: `127.0.0.1:${opts.port}` }
  })
}

export { WebSocket }
