/*
 * One HTTP request relayed to an app in a sandbox (docs/features.md#app-preview-urls): the request body
 * streamed with its cap, the answer's head awaited within the headers timeout, then the answer
 * streamed as it comes (SSE stays unbuffered) with its own cap and an idle timeout both ways.
 */
import { request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http'
import { Transform, type Readable, type Writable } from 'node:stream'
import type { FastifyReply } from 'fastify'
import { responseHeaders, type AppView } from './headers.js'
import { PORTS_APP_TIMEOUT, PORTS_APP_UNREACHABLE, PORTS_BAD_ANSWER, PORTS_REQUEST_TOO_LARGE } from './errors.js'
import type { AppConnection, SandboxAgent } from './connection.js'
import { definitionOf } from '../../core/errors.js'

export interface ProxyLimits {
  maxRequestBytes: number
  maxResponseBytes: number
  headersTimeoutMs: number
  idleTimeoutMs: number
  maxHeaderBytes: number
}

export interface RelayedRequest {
  method: string
  /** path and query as the app sees them */
  path: string
  headers: OutgoingHttpHeaders
  /** the body, when the request has one */
  body: Readable | undefined
  view: AppView
}

/** Counts bytes through; past `max` it fails with `tooBig()`. */
function capped (max: number, tooBig: () => Error): Transform {
  let seen = 0
  return new Transform({
    transform (chunk: Buffer, _encoding, done) {
      seen += chunk.length
      if (seen > max) { done(tooBig()); return }
      done(null, chunk)
    }
  })
}

const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS'])

/** Maps what the http client reports before an answer's head to our coded errors. */
function headError (err: Error & { code?: string }, port: number, socket: AppConnection | undefined): Error {
  if (typeof err.code === 'string' && err.code.startsWith('HPE_')) return new PORTS_BAD_ANSWER(err.code === 'HPE_HEADER_OVERFLOW' ? 'headers too large' : 'malformed HTTP', { cause: err })
  const complaint = socket?.complaint ?? ''
  if (complaint !== '' && !/refused/i.test(complaint.slice(0, 300))) return new PORTS_BAD_ANSWER('the connection failed', { cause: err })
  return new PORTS_APP_UNREACHABLE(String(port), { cause: err })
}

/** Sends the request and resolves with the answer's head; retried once on a reused keep-alive connection the app had closed. */
async function exchange (agent: SandboxAgent, req: RelayedRequest, limits: ProxyLimits, retry: boolean): Promise<IncomingMessage> {
  return await new Promise((resolve, reject) => {
    const out = httpRequest({
      agent,
      host: '127.0.0.1',
      port: req.view.port,
      method: req.method,
      path: req.path,
      headers: req.headers,
      maxHeaderSize: limits.maxHeaderBytes,
      setHost: false
    })
    let socket: AppConnection | undefined
    const timer = setTimeout(() => { out.destroy(new PORTS_APP_TIMEOUT(String(Math.round(limits.headersTimeoutMs / 1000)))) }, limits.headersTimeoutMs)
    timer.unref()
    out.on('socket', s => {
      const own = s as unknown as AppConnection
      socket = own
      // Idle while the body is sent and the answer read (the headers timer covers the wait for the head);
      // one listener per exchange, removed when it ends (the agent then sets its own free-socket timeout).
      const idle = (): void => { out.destroy(new PORTS_APP_TIMEOUT(String(Math.round(limits.idleTimeoutMs / 1000)))) }
      own.setTimeout(limits.idleTimeoutMs)
      own.on('timeout', idle)
      out.once('close', () => { own.off('timeout', idle) })
    })
    out.once('error', (err: Error & { code?: string }) => {
      clearTimeout(timer)
      if (retry && out.reusedSocket && err.code === 'ECONNRESET' && req.body === undefined && IDEMPOTENT.has(req.method)) {
        exchange(agent, req, limits, false).then(resolve, reject)
        return
      }
      reject(definitionOf(err) !== undefined ? err : headError(err, req.view.port, socket))
    })
    out.once('response', res => {
      clearTimeout(timer)
      resolve(res)
    })
    if (req.body === undefined) { out.end(); return }
    req.body.pipe(capped(limits.maxRequestBytes, () => new PORTS_REQUEST_TOO_LARGE(String(limits.maxRequestBytes))))
      .on('error', err => { out.destroy(err) })
      .pipe(out)
  })
}

/**
 * Relays one request and writes the answer to `reply` (hijacked once the head arrived, so errors
 * before it are ordinary coded errors for the route's error handler). Resolves when the answer ended
 * or either side went away.
 */
export async function relayHttp (agent: SandboxAgent, req: RelayedRequest, reply: FastifyReply, limits: ProxyLimits, extraHeaders: OutgoingHttpHeaders): Promise<void> {
  const res = await exchange(agent, req, limits, true)
  // From the raw headers: `res.headers` would build another object of them (docs/performance.md, (k)).
  // extraHeaders (lower-cased names): ours, where the app set none of that name.
  const headers = responseHeaders(res.rawHeaders, req.view, req.path, extraHeaders)
  const declared = Number(headers['content-length'] ?? 0)
  if (Number.isFinite(declared) && declared > limits.maxResponseBytes) {
    res.destroy()
    throw new PORTS_BAD_ANSWER(`the answer exceeds ${limits.maxResponseBytes} bytes`)
  }
  reply.hijack()
  const raw = reply.raw
  const status = res.statusCode ?? 502
  // The whole answer already arrived (a small one comes in one chunk with its head): it leaves in one
  // write with its head, without a stream pipeline, and with its length (the app may have chunked it)
  // (docs/performance.md, (k)).
  if (res.complete && res.readableLength <= limits.maxResponseBytes) {
    const body = readWhole(res)
    if (headers['content-length'] === undefined && req.method !== 'HEAD' && status >= 200 && status !== 204 && status !== 304) headers['content-length'] = body.length
    raw.writeHead(status, headers)
    await new Promise<void>(resolve => {
      raw.once('finish', resolve)
      raw.once('close', resolve)
      raw.end(body)
    })
    return
  }
  raw.writeHead(status, headers)
  // Streamed: the head goes out at once unless body bytes are already there to carry it (SSE stays unbuffered).
  if (res.readableLength === 0) raw.flushHeaders()
  await pump(res, capped(limits.maxResponseBytes, () => new PORTS_BAD_ANSWER('answer too large')), raw)
}

/** The body of a complete answer, already read. */
function readWhole (res: IncomingMessage): Buffer {
  const chunks: Buffer[] = []
  for (let chunk: Buffer | null = res.read() as Buffer | null; chunk !== null; chunk = res.read() as Buffer | null) chunks.push(chunk)
  return chunks.length === 1 ? chunks[0] as Buffer : Buffer.concat(chunks)
}

/** res → cap → client; a failure on any side destroys the others (the client sees a cut answer). */
async function pump (res: IncomingMessage, cap: Transform, raw: Writable): Promise<void> {
  await new Promise<void>(resolve => {
    let done = false
    const finish = (err?: Error): void => {
      if (done) return
      done = true
      if (err !== undefined) { res.destroy(); cap.destroy(); raw.destroy() }
      resolve()
    }
    res.once('aborted', () => { finish(new Error('aborted')) })
    res.once('error', finish)
    cap.once('error', finish)
    raw.once('error', finish)
    raw.once('close', () => { if (!raw.writableFinished) finish(new Error('client gone')); else finish() })
    raw.once('finish', () => { finish() })
    res.pipe(cap).pipe(raw)
  })
}
