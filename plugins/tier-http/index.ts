import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import { TierHttpOptions } from './schemas.js'
import routes from './routes.js'

/**
 * Prompt tier 6 (docs/contract.md#tier-6-get-system-prompt): GET /system-prompt for clients outside MCP (Open WebUI filters, n8n,
 * LiteLLM deployments), plus the skill listing routes of docs/contract.md#skills
 */
const tierHttp: FastifyPluginAsync<TierHttpOptions> = async (fastify, raw) => {
  const opts = parseOptions(TierHttpOptions, raw, 'tier-http')
  await fastify.register(routes, { singleUserMode: opts.singleUserMode })
}

export default fp(tierHttp, {
  name: 'tier-http',
  fastify: '5.x',
  dependencies: ['capabilities', 'prompt-render'],
  decorators: { fastify: ['links', 'prompts', 'auth'] }
})
