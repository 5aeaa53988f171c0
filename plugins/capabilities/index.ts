import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import { CapabilitiesOptions } from './schemas.js'
import { createLinkService } from './service.js'

/** Capability links (docs/contract.md#capability-tokens, docs/contract.md#url-shapes): mints and verifies per-chat tokens, builds public URLs. */
const capabilities: FastifyPluginAsync<CapabilitiesOptions> = async (fastify, raw) => {
  const opts = parseOptions(CapabilitiesOptions, raw, 'capabilities')
  const links = createLinkService(opts)
  fastify.decorate('links', links)
  // Chat routes accept these tokens through core auth; the API key is checked there first.
  fastify.auth.addTokenVerifier((token, chatId, scope) => links.verify(token, chatId, scope) === 'ok' ? 'ok' : 'forbidden')
}

export default fp(capabilities, { name: 'capabilities', fastify: '5.x', decorators: { fastify: ['auth'] } })
