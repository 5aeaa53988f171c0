import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { errorBody } from '../../core/errors.js'
import { createOriginPolicy } from '../../core/origin.js'
import { requireKey } from '../../core/route-kit.js'
import { MCP_FORBIDDEN_ORIGIN, MCP_METHOD_NOT_ALLOWED } from './errors.js'
import type { McpTransportOptions } from './schemas.js'

const CORS_ALLOW_HEADERS = ['Authorization', 'Content-Type', 'Accept', 'Mcp-Session-Id', 'MCP-Protocol-Version', 'Last-Event-ID',
  'X-Chat-Id', 'X-OpenWebUI-Chat-Id', 'X-User-Email', 'X-OpenWebUI-User-Email', 'X-User-Name', 'X-OpenWebUI-User-Name',
  'X-Gitlab-Token', 'X-OpenWebUI-Gitlab-Token', 'X-Gitlab-Host', 'X-OpenWebUI-Gitlab-Host', 'X-Anthropic-Api-Key',
  'X-OpenWebUI-Anthropic-Api-Key', 'X-Anthropic-Base-Url', 'X-OpenWebUI-Anthropic-Base-Url', 'X-Mcp-Tokens-Url',
  'X-OpenWebUI-Mcp-Tokens-Url', 'X-Mcp-Tokens-Api-Key', 'X-OpenWebUI-Mcp-Tokens-Api-Key', 'X-Mcp-Servers', 'X-OpenWebUI-Mcp-Servers'].join(', ')
/** A browser script reads these response headers only when they are exposed (docs/contract.md#transport, docs/contract.md#authentication-and-origin). */
const CORS_EXPOSE_HEADERS = 'WWW-Authenticate, Mcp-Session-Id'

/**
 * Origin check, CORS and authentication of /mcp (docs/contract.md#authentication-and-origin), in an onRequest hook: they run
 * before any body is parsed. Returns the preflight handler for the OPTIONS routes.
 */
export function registerGuard (fastify: FastifyInstance, opts: Required<McpTransportOptions>): (request: FastifyRequest, reply: FastifyReply) => Promise<unknown> {
  const verdict = createOriginPolicy(opts)
  const corsOrigin = (request: FastifyRequest): string | undefined => {
    const origin = request.headers.origin
    return origin !== undefined && verdict(origin, request.socket.localPort) === 'listed' ? origin : undefined
  }

  fastify.addHook('onRequest', async (request, reply) => {
    const origin = request.headers.origin
    if (origin !== undefined && verdict(origin, request.socket.localPort) === 'foreign') {
      request.log.warn({ origin: origin.slice(0, 300) }, 'refused a /mcp request from a foreign Origin')
      return await reply.code(403).send(errorBody(new MCP_FORBIDDEN_ORIGIN()))
    }
    const cors = corsOrigin(request)
    if (cors !== undefined) {
      reply.header('Access-Control-Allow-Origin', cors).header('Vary', 'Origin').header('Access-Control-Expose-Headers', CORS_EXPOSE_HEADERS)
    }
    if (request.method === 'OPTIONS' || !fastify.auth.protectedMode) return
    try {
      await requireKey(request, reply)
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 429) throw err
      return await reply.code(401).header('WWW-Authenticate', 'Bearer').type('application/json').send('{"error": "Unauthorized"}')
    }
  })

  return async (request, reply) => {
    if (corsOrigin(request) === undefined) {
      return await reply.code(405).header('Allow', 'GET, POST, DELETE').send(errorBody(new MCP_METHOD_NOT_ALLOWED()))
    }
    return await reply.code(204).header('Access-Control-Allow-Methods', 'GET, POST, DELETE, OPTIONS')
      .header('Access-Control-Allow-Headers', CORS_ALLOW_HEADERS).header('Access-Control-Max-Age', '600').send()
  }
}
