import type { FastifyInstance } from 'fastify'
import { CORE_FORBIDDEN_ORIGIN } from './errors.js'

/**
 * The browser Origin rule of chat routes (core/origin.ts, README "Security model"), as an onRequest
 * hook of the encapsulated routes plugin that calls it (it then covers only that plugin's routes):
 * an accepted Origin is echoed in `Access-Control-Allow-Origin` (never `*`, never with credentials:
 * no ambient credentials exist, tokens travel in the URL or Authorization); a WebSocket upgrade or a
 * state-changing request from an Origin that is not accepted is refused with 403 before anything
 * else runs; a cross-origin read from such an Origin is answered without CORS headers, which keeps
 * the answer from the page.
 */
export function chatRouteOrigin (fastify: FastifyInstance): void {
  const { origins } = fastify
  fastify.addHook('onRequest', async (request, reply) => {
    reply.header('Vary', 'Origin')
    const allow = origins.corsOrigin(request)
    if (allow !== undefined) {
      reply.header('Access-Control-Allow-Origin', allow)
      return
    }
    if (origins.refuses(request)) {
      request.log.warn({ origin: String(request.headers.origin).slice(0, 300) }, 'refused a chat-route request from an Origin that is not allowed')
      throw new CORE_FORBIDDEN_ORIGIN()
    }
  })
}

/**
 * chatRouteOrigin plus answers to CORS preflights on `paths` (methods `GET, POST, OPTIONS`, headers
 * `Authorization, Content-Type`): the preview page, embedded in an opaque-origin iframe in protected
 * mode, sends its control calls with a Bearer token and a JSON body, which need a preflight.
 */
export function chatRouteCors (fastify: FastifyInstance, paths: string[]): void {
  chatRouteOrigin(fastify)
  for (const path of paths) {
    fastify.options(path, async (_request, reply) => await reply.code(204)
      .header('Access-Control-Allow-Methods', 'GET, POST, OPTIONS')
      .header('Access-Control-Allow-Headers', 'Authorization, Content-Type')
      .header('Access-Control-Max-Age', '600')
      .send())
  }
}
