import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import { TierResourcesOptions } from './schemas.js'
import { createUploadResources } from './service.js'
import { createSkillResources } from './skills.js'
import type {} from '../prompt-render/types.js'

/**
 * Prompt tier 5 (surface.md §4.3): every upload of the request's chat as an MCP resource, and
 * notifications/resources/list_changed on that chat's open GET /mcp streams after each upload; and,
 * when prompt-render is loaded, the skills offered to the request's user as skill://<category>/<name>
 * (issue #16).
 */
const tierResources: FastifyPluginAsync<TierResourcesOptions> = async (fastify, raw) => {
  const opts = parseOptions(TierResourcesOptions, raw, 'tier-resources')
  const { mcp, uploads } = fastify
  mcp.addResourceProvider(createUploadResources(uploads, opts))
  if (fastify.hasDecorator('prompts')) mcp.addResourceProvider(createSkillResources(fastify.prompts))
  uploads.onUpload(({ chatId }) => {
    mcp.notifyChat(chatId, { method: 'notifications/resources/list_changed' })
  })
}

export default fp(tierResources, {
  name: 'tier-resources',
  fastify: '5.x',
  dependencies: ['mcp-transport', 'uploads'],
  decorators: { fastify: ['mcp', 'uploads'] }
})
