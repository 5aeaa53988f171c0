import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import type {} from '@fastify/swagger'
import Type, { type Static } from 'typebox'
import { parseOptions } from '../../core/config.js'
import { renderDocsPage } from './page.js'

export const DocsOptions = Type.Object({
  publicBaseUrl: Type.String(),
  singleUserMode: Type.Optional(Type.String({ default: 'lenient' }))
})
export type DocsOptions = Static<typeof DocsOptions>

/**
 * GET / — a page for a person: what this server is and how to connect a client. No secrets, no chat
 * data. GET /openapi.json — the HTTP routes as OpenAPI 3.1, generated from their schemas.
 */
const docs: FastifyPluginAsync<DocsOptions> = async (fastify, raw) => {
  const opts = parseOptions(DocsOptions, raw, 'docs')
  let html: string | undefined
  fastify.get('/', { schema: { summary: 'This connection page (HTML)', tags: ['operations'], produces: ['text/html'] } }, async (_request, reply) => {
    // Rendered on first use: the tool list is complete only once every plugin has loaded.
    html ??= renderDocsPage({ publicBaseUrl: opts.publicBaseUrl, tools: fastify.hasDecorator('mcp') ? fastify.mcp.listTools() : [] })
    return await reply.type('text/html; charset=utf-8')
      .header('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
      .send(html)
  })

  // The OpenAPI description of every route, from the schemas plugins declare (@fastify/swagger, core/app.ts).
  if (fastify.hasDecorator('swagger')) {
    let spec: string | undefined
    fastify.get('/openapi.json', { schema: { summary: 'This OpenAPI description', tags: ['operations'], hide: true } }, async (_request, reply) => {
      // Built once, on first use: every plugin has added its routes by then.
      spec ??= JSON.stringify(fastify.swagger())
      return await reply.type('application/json; charset=utf-8').header('Cache-Control', 'no-cache').send(spec)
    })
  }
}

export default fp(docs, { name: 'docs', fastify: '5.x' })
