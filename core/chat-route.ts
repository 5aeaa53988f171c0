import type { FastifyInstance } from 'fastify'

/**
 * Chat routes are readable from any origin and answer preflights (surface.md §6.1 item 6): safe
 * because no ambient credentials exist (tokens travel in the URL or Authorization), and needed
 * because the preview runs inside an opaque-origin iframe. Register inside an encapsulated routes
 * plugin: the hook then covers only that plugin's routes.
 */
export function chatRouteCors (fastify: FastifyInstance, paths: string[]): void {
  fastify.addHook('onRequest', async (_request, reply) => { reply.header('Access-Control-Allow-Origin', '*') })
  for (const path of paths) {
    fastify.options(path, async (_request, reply) => await reply.code(204)
      .header('Access-Control-Allow-Methods', 'GET, POST, OPTIONS')
      .header('Access-Control-Allow-Headers', 'Authorization, Content-Type')
      .header('Access-Control-Max-Age', '600')
      .send())
  }
}
