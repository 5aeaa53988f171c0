import { randomBytes } from 'node:crypto'
import type { FastifyReply } from 'fastify'

/** SSE framing of /mcp (surface.md §2.3). Every function here writes to a hijacked reply. */
export const SSE_HEADERS = { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache, no-transform', 'X-Accel-Buffering': 'no', Connection: 'keep-alive' }

export interface StreamOptions {
  /** The `retry` field: how long a client waits before it reconnects this stream. */
  retryMs: number
  /**
   * POST streams start with a priming event, an `id` and empty `data` (protocol 2025-11-25, SEP-1699).
   * GET streams carry only the `retry` field: their events have no ids to resume from.
   */
  priming: boolean
}

/** Sends the status line and headers and opens the stream. */
export function openStream (reply: FastifyReply, opts: StreamOptions): void {
  reply.hijack()
  reply.raw.writeHead(200, { ...reply.getHeaders() as Record<string, string>, ...SSE_HEADERS })
  // One write, so the priming event is the first thing on the wire (its id is random and resumes
  // nothing: a GET carrying it as Last-Event-ID gets 405, see routes.ts).
  reply.raw.write(opts.priming
    ? `id: ${randomBytes(12).toString('base64url')}\nretry: ${opts.retryMs}\ndata: \n\n`
    : `retry: ${opts.retryMs}\n: stream open\n\n`)
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
