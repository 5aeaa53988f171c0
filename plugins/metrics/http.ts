import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { CORE_TOO_MANY_FAILURES } from '../../core/errors.js'
import type { Collectors } from './collectors.js'

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'])
/** 401 and 403 are credential refusals on every route of this server (403 also for a foreign Origin). */
const AUTH_STATUSES = new Set([401, 403])

/** The route pattern (`/files/:chat/*`), never the URL: URLs carry chat ids and capability tokens. */
function routeOf (request: FastifyRequest): string {
  return request.routeOptions.url ?? '(unmatched)'
}

/**
 * Observes every HTTP answer through `reply.raw`'s close event rather than onResponse: the MCP
 * transport hijacks its replies (no onResponse), and a client that leaves mid-stream still counts.
 * Bytes are the socket's bytesWritten delta (HTTP/1.1 answers one request at a time per socket).
 * WebSocket upgrades are not HTTP answers and are skipped.
 */
export function observeHttp (fastify: FastifyInstance, c: Collectors): void {
  // A 429 counts as an auth failure only when the failed-auth throttle sent it (not a busy archive).
  const throttled = new WeakSet<FastifyRequest>()
  fastify.addHook('onError', async (request, _reply, err) => {
    if (err instanceof CORE_TOO_MANY_FAILURES) throttled.add(request)
  })
  fastify.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.headers.upgrade !== undefined) return
    const started = process.hrtime.bigint()
    const socket = request.raw.socket as { bytesWritten?: number } | null
    const bytesBefore = socket?.bytesWritten
    c.inFlight.inc()
    reply.raw.once('close', () => {
      c.inFlight.dec()
      const route = routeOf(request)
      const method = METHODS.has(request.method) ? request.method : 'OTHER'
      const status = reply.raw.statusCode
      c.requests.inc({ method, route, status: String(status) })
      c.requestSeconds.observe({ method, route }, Number(process.hrtime.bigint() - started) / 1e9)
      if (typeof bytesBefore === 'number' && typeof socket?.bytesWritten === 'number') {
        c.bytesServed.inc({ route }, Math.max(0, socket.bytesWritten - bytesBefore))
      }
      if (AUTH_STATUSES.has(status) || (status === 429 && throttled.has(request))) {
        c.authFailures.inc({ route, status: String(status) })
      }
    })
  })
}
