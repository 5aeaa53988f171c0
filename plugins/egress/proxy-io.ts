import type { Socket } from 'node:net'
import type { Transform } from 'node:stream'
import { headEnd, MAX_HEAD, parseHead, refusal, type Head } from './head.js'
import { MAX_SOCKS, methodReply, parseSocks, REP, SOCKS_VERSION, socksReply, type SocksParse } from './socks.js'

/*
 * The proxy's socket side: reading the first request (an HTTP head or a SOCKS5 greeting and request),
 * answering it (an HTTP status line or a SOCKS5 reply code), and splicing an open tunnel.
 */

/** How a refusal or an open tunnel is told to the client: HTTP status lines, or SOCKS5 replies. */
export interface Replies {
  refuse: (status: number, d: { message: string, reason: string }) => void
  established: (upstream: Socket) => void
}

export function httpReplies (client: Socket, head: Head): Replies {
  return {
    refuse: (status, d) => { client.end(refusal(status, d.message)) },
    established: upstream => {
      if (head.kind === 'connect') client.write('HTTP/1.1 200 Connection Established\r\n\r\n')
      else upstream.write(head.head)
    }
  }
}

/** SOCKS5 carries no text: the reply code says what kind of refusal, the per-chat log says why. */
export function socksReplies (client: Socket): Replies {
  return {
    refuse: (status, d) => {
      const code = status === 403 ? REP.notAllowed : d.reason === 'dns' ? REP.hostUnreachable : d.reason === 'upstream' ? REP.refused : REP.failure
      client.end(socksReply(code))
    },
    established: () => { client.write(socksReply(REP.ok)) }
  }
}

export interface RequestReaders {
  http: (err: string | null, head?: Head, rest?: Buffer) => void
  socks: (result: SocksParse, rest: Buffer) => void
}

/**
 * Reads the first request (within timeoutMs), then stops reading: an HTTP head (≤ MAX_HEAD bytes), or,
 * when the first byte is 0x05, a SOCKS5 greeting (answered at once) and CONNECT request (≤ MAX_SOCKS).
 */
export function readRequest (client: Socket, timeoutMs: number, readers: RequestReaders): void {
  const chunks: Buffer[] = []
  let size = 0
  let greeted = false
  const timer = setTimeout(() => {
    finish()
    if (chunks[0]?.[0] === SOCKS_VERSION) client.destroy()
    else readers.http('no request within the time limit')
  }, timeoutMs)
  const finish = (): void => { clearTimeout(timer); client.off('data', onData); client.off('end', onEnd) }
  const onEnd = (): void => { finish(); client.destroy() }
  const onSocks = (buf: Buffer): void => {
    const methods = buf[1]
    if (!greeted && methods !== undefined && buf.length >= 2 + methods && buf.subarray(2, 2 + methods).includes(0x00)) {
      greeted = true
      client.write(methodReply(true))
    }
    const result = parseSocks(buf.subarray(0, MAX_SOCKS))
    if (result.state === 'more') {
      if (buf.length >= MAX_SOCKS) { finish(); client.destroy() }
      return
    }
    finish()
    client.pause()
    readers.socks(result, result.state === 'done' ? buf.subarray(result.used) : Buffer.alloc(0))
  }
  const onData = (chunk: Buffer): void => {
    chunks.push(chunk)
    size += chunk.length
    const buf = chunks.length === 1 ? chunk : Buffer.concat(chunks)
    chunks.length = 0
    chunks.push(buf)
    if (buf[0] === SOCKS_VERSION) { onSocks(buf); return }
    const done = readers.http
    const end = headEnd(buf.subarray(0, MAX_HEAD + 4))
    if (end < 0) {
      if (size > MAX_HEAD) { finish(); done('request head larger than 16 KiB') }
      return
    }
    finish()
    client.pause()
    const head = parseHead(buf.subarray(0, end))
    if (typeof head === 'string') { done(head); return }
    done(null, head, buf.subarray(end))
  }
  client.on('data', onData)
  client.on('end', onEnd)
}

/** Pipes both ways with backpressure; either side idle for idleMs (no bytes either way) closes both. */
export function splice (client: Socket, upstream: Socket, idleMs: number, throttle: (() => Transform) | null): void {
  client.setTimeout(idleMs, () => { client.destroy(); upstream.destroy() })
  upstream.setTimeout(idleMs, () => { client.destroy(); upstream.destroy() })
  if (throttle === null) {
    client.pipe(upstream)
    upstream.pipe(client)
  } else {
    client.pipe(throttle()).pipe(upstream)
    upstream.pipe(throttle()).pipe(client)
  }
  client.resume()
  client.once('close', () => upstream.destroy())
  // A clean end reaches the client through the pipe (after any throttled chunks); anything else drops it.
  upstream.once('close', () => { if (!upstream.readableEnded) client.destroy() })
}
