import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import { capInstructions } from './cap.js'
import { DYNAMIC_PRIORITY, TierDynamicInstructionsOptions } from './schemas.js'

/**
 * Prompt tier 4 (docs/contract.md#dynamic-instructions): the chat's full rendered prompt as InitializeResult.instructions,
 * per request. No resolved chat (strict mode, invalid id) or a failed render → undefined, so tier 3
 * answers; a failure is logged, never a JSON-RPC error.
 */
const tierDynamicInstructions: FastifyPluginAsync<TierDynamicInstructionsOptions> = async (fastify, raw) => {
  const { maxBytes } = parseOptions(TierDynamicInstructionsOptions, raw, 'tier-dynamic-instructions')
  const { prompts } = fastify
  fastify.mcp.addInstructions(DYNAMIC_PRIORITY, async ctx => {
    if (ctx.resolution.kind !== 'chat') return undefined
    try {
      const text = await prompts.render({ chatId: ctx.resolution.chatId, ...(ctx.user.email !== undefined && { email: ctx.user.email }), credentials: ctx.user.credentials })
      return capInstructions(text, maxBytes)
    } catch (err) {
      ctx.log.error({ err }, 'rendering the dynamic instructions failed; the static ones answer')
      return undefined
    }
  })
}

export default fp(tierDynamicInstructions, {
  name: 'tier-dynamic-instructions',
  fastify: '5.x',
  dependencies: ['mcp-transport', 'prompt-render'],
  decorators: { fastify: ['mcp', 'prompts'] }
})
