import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import { TierReadmeOptions } from './schemas.js'
import { createReadmeHooks } from './service.js'

/** Prompt tier 2 (docs/contract.md#tier-2-the-sandbox-readme): the rendered prompt as /home/assistant/README.md inside the sandbox. */
const tierReadme: FastifyPluginAsync<TierReadmeOptions> = async (fastify, raw) => {
  const opts = parseOptions(TierReadmeOptions, raw, 'tier-readme')
  const log = fastify.log.child({ plugin: 'tier-readme' })
  const hooks = createReadmeHooks({ sandbox: fastify.sandbox, prompts: fastify.prompts, log }, opts)
  // Written while the sandbox starts where the service can (onStart), else after the start (onEnsure).
  fastify.sandbox.onStart?.(hooks.start)
  fastify.sandbox.onEnsure(hooks.ensure)
}

export default fp(tierReadme, {
  name: 'tier-readme',
  fastify: '5.x',
  dependencies: ['sandbox', 'prompt-render'],
  decorators: { fastify: ['sandbox', 'prompts'] }
})
