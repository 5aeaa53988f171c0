import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import { UserSkillsOptions } from './schemas.js'
import { createUserSkillsService } from './service.js'
import type {} from '../sandbox/types.js'

/**
 * Per-user skills (docs/contract.md#skills): the settings service client, its caches and the user
 * ZIP skill store. Decorates `fastify.userSkills`, which prompt-render, tier-http and tier-resources
 * consult; gives a sandbox driver that supports extra mounts (sandbox-docker's `addMounts`) the
 * user's ready skills, read-only at /mnt/skills/user/<name>, whenever it creates a sandbox.
 */
const userSkills: FastifyPluginAsync<UserSkillsOptions & { now?: () => number }> = async (fastify, raw) => {
  const { now, ...rest } = raw
  const opts = parseOptions(UserSkillsOptions, rest, 'user-skills')
  const log = fastify.log.child({ plugin: 'user-skills' })
  const service = await createUserSkillsService({
    ...opts,
    cacheHostDir: opts.cacheHostDir.trim() || opts.cacheDir,
    now: now ?? Date.now
  }, log)
  fastify.decorate('userSkills', service)
  fastify.addHook('onClose', async () => { await service.close() })
  if (fastify.hasDecorator('sandbox') && fastify.sandbox.addMounts !== undefined) {
    fastify.sandbox.addMounts(async ({ chatId, email, user }) => {
      const mounts = await service.mounts({ ...(email !== undefined && { email }), ...(user !== undefined && { credentials: user.credentials }) }, chatId)
      return mounts.map(m => ({ source: m.hostDir, target: m.target }))
    })
    // A running (or paused) sandbox keeps the skills it mounted: they are not evicted until it stops.
    fastify.sandbox.onStop?.(chatId => { service.release(chatId) })
  }
  if (opts.tokensUrl.trim() !== '') log.info('per-user skills from the settings service (MCP_TOKENS_URL)')
}

export default fp(userSkills, { name: 'user-skills', fastify: '5.x' })
