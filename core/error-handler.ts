import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import { wireCode } from './errors.js'

/** The one place errors become HTTP replies: `{"error","detail"}`, 401 as `{"error":"Unauthorized"}`, 5xx without details. */
export function errorHandler (err: FastifyError & { wireCode?: string, extra?: Record<string, unknown> }, request: FastifyRequest, reply: FastifyReply): FastifyReply {
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
