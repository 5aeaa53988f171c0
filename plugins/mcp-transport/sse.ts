import { randomBytes } from 'node:crypto'
import type { FastifyReply } from 'fastify'

/** SSE framing of /mcp (docs/contract.md#reply-format). Every function here writes to a hijacked reply. */
export const SSE_HEADERS = { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache, no-transform', 'X-Accel-Buffering': 'no', Connection: 'keep-alive' }

export interface StreamOptions {
  /** The `retry` field: how long a client waits before it reconnects a stream. */
  retryMs: number
  /**
   * The client speaks protocol 2025-11-25 (session.ts): a POST stream then starts with a priming
   * event, an `id` and empty `data` (SEP-1699), and every stream carries the `retry` field. Older
   * clients get neither: some dispatch any field-only block as an event with empty data and fail to
   * parse it as JSON.
   */
  primed: boolean
  /** POST streams answer one request; GET streams carry notifications and have no ids to resume. */
  kind: 'post' | 'get'
}

/** Sends the status line and headers and opens the stream. */
export function openStream (reply: FastifyReply, opts: StreamOptions): void {
  reply.hijack()
  reply.raw.writeHead(200, { ...reply.getHeaders() as Record<string, string>, ...SSE_HEADERS })
  // One write, so the priming event is the first thing on the wire (its id is random and resumes
  // nothing: a GET carrying it as Last-Event-ID gets 405, see routes.ts).
  if (opts.kind === 'post' && opts.primed) reply.raw.write(`id: ${randomBytes(12).toString('base64url')}\nretry: ${opts.retryMs}\ndata: \n\n`)
  else if (opts.kind === 'get') reply.raw.write(`${opts.primed ? `retry: ${opts.retryMs}\n` : ''}: stream open\n\n`)
  else reply.raw.flushHeaders()
}

/** One JSON-RPC message as one `event: message`; ignored once the stream has ended. */
export function writeEvent (reply: FastifyReply, message: unknown): void {
  if (!reply.raw.writableEnded) reply.raw.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`)
}

/** A `: keep-alive` comment every `ms` until the returned function is called. */
export function keepAlive (reply: FastifyReply, ms: number): () => void {
  const timer = setInterval(() => { if (!reply.raw.writableEnded) reply.raw.write(': keep-alive\n\n') }, ms)
  return () => { clearInterval(timer) }
}
