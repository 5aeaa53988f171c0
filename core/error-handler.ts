import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import { wireCodeOf } from './errors.js'

/** What an error may carry beyond FastifyError: body fields (`extra`) and headers (e.g. Retry-After of a 429). */
type HandledError = FastifyError & { extra?: Record<string, unknown>, headers?: Record<string, string> }

/**
 * The one place errors become HTTP replies: `{"error": <wire code>, "detail"}` (docs/errors.md), 401 with
 * `WWW-Authenticate: Bearer`, 5xx without details (the log has them, the body a reference).
 */
export function errorHandler (err: HandledError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  // Headers an error carries, as Fastify's default handler applies them.
  if (err.headers !== undefined && err.statusCode !== undefined && err.statusCode < 500) reply.headers(err.headers)
  if (err.validation !== undefined) {
    return reply.code(400).send({ error: 'bad_request', detail: err.message })
  }
  const status = err.statusCode !== undefined && err.statusCode >= 400 ? err.statusCode : 500
  if (status === 401) {
    return reply.code(401).header('WWW-Authenticate', 'Bearer').send({ error: 'Unauthorized', detail: err.message })
  }
  const error = wireCodeOf(err, status)
  if (status < 500) return reply.code(status).send({ error, detail: err.message, ...err.extra })
  request.log.error({ err }, 'request failed')
  return reply.code(status).send({ error, detail: `internal error (ref ${request.id})` })
}
