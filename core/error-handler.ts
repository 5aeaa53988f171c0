import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import { wireCode } from './errors.js'

/** The one place errors become HTTP replies: `{"error","detail"}`, 401 as `{"error":"Unauthorized"}`, 5xx without details. */
export function errorHandler (err: FastifyError & { wireCode?: string, extra?: Record<string, unknown>, headers?: Record<string, string> }, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  // Headers an error carries (e.g. Retry-After of a 429), as Fastify's default handler applies them.
  if (err.headers !== undefined && err.statusCode !== undefined && err.statusCode < 500) reply.headers(err.headers)
  if (err.validation !== undefined) {
    return reply.code(400).send({ error: 'bad_request', detail: err.message })
  }
  const status = err.statusCode !== undefined && err.statusCode >= 400 ? err.statusCode : 500
  if (status === 401) {
    return reply.code(401).header('WWW-Authenticate', 'Bearer').send({ error: 'Unauthorized', detail: err.message })
  }
  if (status < 500) {
    return reply.code(status).send({ error: err.wireCode ?? wireCode(err.code, status), detail: err.message, ...err.extra })
  }
  request.log.error({ err }, 'request failed')
  return reply.code(status).send({ error: err.wireCode ?? 'internal_error', detail: `internal error (ref ${request.id})` })
}
