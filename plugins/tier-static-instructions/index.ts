import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import { TIER_STATIC_BAD_TEXT } from './errors.js'
import { STATIC_PRIORITY, TierStaticInstructionsOptions } from './schemas.js'

/**
 * Prompt tier 3 (docs/contract.md#tier-3-static-instructions): a short fixed InitializeResult.instructions pointing at README.md and
 * resources/list. It answers whenever no higher tier does (no chat, strict mode, invalid chat, render failure).
 */
const tierStaticInstructions: FastifyPluginAsync<TierStaticInstructionsOptions> = async (fastify, raw) => {
  const { text } = parseOptions(TierStaticInstructionsOptions, raw, 'tier-static-instructions')
  if (!text.includes('README.md') || !text.includes('resources/list') || text.includes('prompts/get')) {
    throw new TIER_STATIC_BAD_TEXT('text must mention README.md and resources/list, and not prompts/get (docs/contract.md#tier-3-static-instructions)')
  }
  fastify.mcp.addInstructions(STATIC_PRIORITY, async () => text)
}

export default fp(tierStaticInstructions, {
  name: 'tier-static-instructions',
  fastify: '5.x',
  dependencies: ['mcp-transport'],
  decorators: { fastify: ['mcp'] }
})
