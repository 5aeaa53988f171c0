import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import { TierResourcesOptions } from './schemas.js'
import { createUploadResources } from './service.js'
import { createSkillResources } from './skills.js'
import { createSkillWatchers } from './skill-watchers.js'
import { createSkillCatalog } from './skill-catalog.js'
import { createManifestCache } from './skill-manifest.js'
import { skillsExtension } from './skills-extension.js'
import type {} from '../prompt-render/types.js'
import type {} from '../user-skills/types.js'

/**
 * Prompt tier 5 (docs/contract.md#tier-5-uploads-as-mcp-resources): every upload of the request's chat as an MCP resource, and
 * notifications/resources/list_changed on that chat's open GET /mcp streams after each upload; and,
 * when prompt-render is loaded, the skills offered to the request's user as skill://<category>/<name>
 * (docs/contract.md#skills), with list_changed to the chats of a user whose skill set changed (a new configuration
 * from the settings service, a user skill download that landed), and the same skills through the MCP skills
 * extension (docs/contract.md#skills-extension).
 */
const tierResources: FastifyPluginAsync<TierResourcesOptions> = async (fastify, raw) => {
  const opts = parseOptions(TierResourcesOptions, raw, 'tier-resources')
  const { mcp, uploads } = fastify
  mcp.addResourceProvider(createUploadResources(uploads, opts))
  if (fastify.hasDecorator('prompts')) {
    const watchers = createSkillWatchers({ maxChats: opts.maxSkillWatchers, ttlMs: 24 * 3600_000 })
    const manifests = createManifestCache(fastify.log.child({ plugin: 'tier-resources' }), { ttlMs: 60_000, maxEntries: opts.maxSkillManifests })
    const catalog = createSkillCatalog(fastify.prompts, manifests)
    mcp.addResourceProvider(createSkillResources({ prompts: fastify.prompts, catalog, manifests, watchers, maxReadBytes: opts.maxReadBytes }))
    mcp.addExtension(skillsExtension(catalog, ctx => {
      if (ctx.resolution.kind === 'chat' && ctx.user.email !== undefined) watchers.remember(ctx.user.email, ctx.resolution.chatId)
    }))
    if (fastify.hasDecorator('userSkills')) {
      fastify.userSkills.onChange(email => {
        for (const chatId of watchers.chatsOf(email)) mcp.notifyChat(chatId, { method: 'notifications/resources/list_changed' })
      })
    }
  }
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
