import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import Type, { type Static } from 'typebox'
import { parseOptions } from '../../core/config.js'
import { renderDocsPage } from './page.js'

export const DocsOptions = Type.Object({
  publicBaseUrl: Type.String(),
  singleUserMode: Type.Optional(Type.String({ default: 'lenient' }))
})
export type DocsOptions = Static<typeof DocsOptions>

/** GET / — a page for a person: what this server is and how to connect a client. No secrets, no chat data. */
const docs: FastifyPluginAsync<DocsOptions> = async (fastify, raw) => {
  const opts = parseOptions(DocsOptions, raw, 'docs')
  let html: string | undefined
  fastify.get('/', async (_request, reply) => {
    // Rendered on first use: the tool list is complete only once every plugin has loaded.
    html ??= renderDocsPage({ publicBaseUrl: opts.publicBaseUrl, tools: fastify.hasDecorator('mcp') ? fastify.mcp.listTools() : [] })
    return await reply.type('text/html; charset=utf-8')
      .header('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
      .send(html)
  })
}

export default fp(docs, { name: 'docs', fastify: '5.x' })
