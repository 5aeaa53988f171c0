import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import { TierToolDescriptionsOptions } from './schemas.js'

/**
 * Prompt tier 1 (docs/contract.md#common-tool-rules, docs/contract.md#prompt-tiers): a recovery hint in the descriptions of bash_tool and
 * view, for clients that drop the instructions and never read resources. Tools not registered are
 * simply not touched.
 */
const tierToolDescriptions: FastifyPluginAsync<TierToolDescriptionsOptions> = async (fastify, raw) => {
  const { tools, hint } = parseOptions(TierToolDescriptionsOptions, raw, 'tier-tool-descriptions')
  const targets = new Set(tools)
  fastify.mcp.transformToolList(list => list.map(tool => {
    if (!targets.has(tool.name) || (tool.description ?? '').includes(hint)) return tool
    const description = (tool.description ?? '').trimEnd()
    return { ...tool, description: description === '' ? hint : `${description}\n\n${hint}` }
  }))
}

export default fp(tierToolDescriptions, {
  name: 'tier-tool-descriptions',
  fastify: '5.x',
  dependencies: ['mcp-transport'],
  decorators: { fastify: ['mcp'] }
})
