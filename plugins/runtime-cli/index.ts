import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import Type, { type Static } from 'typebox'
import { parseOptions } from '../../core/config.js'
import { resolveModel } from './model.js'
import type { RuntimeCliService } from './types.js'

const Settings = Type.Object({
  SUB_AGENT_DEFAULT_MODEL: Type.Optional(Type.String({ default: '' })),
  CODEX_SUB_AGENT_DEFAULT_MODEL: Type.Optional(Type.String({ default: '' })),
  CODEX_MODEL: Type.Optional(Type.String({ default: '' })),
  OPENCODE_SUB_AGENT_DEFAULT_MODEL: Type.Optional(Type.String({ default: '' })),
  OPENCODE_MODEL: Type.Optional(Type.String({ default: '' })),
  ANTHROPIC_DEFAULT_SONNET_MODEL: Type.Optional(Type.String({ default: '' })),
  ANTHROPIC_DEFAULT_OPUS_MODEL: Type.Optional(Type.String({ default: '' })),
  ANTHROPIC_DEFAULT_HAIKU_MODEL: Type.Optional(Type.String({ default: '' }))
})
export const RuntimeCliOptions = Type.Object({
  cli: Type.Union([Type.Literal('claude'), Type.Literal('codex'), Type.Literal('opencode')]),
  models: Type.Optional(Settings)
})
export type RuntimeCliOptions = Static<typeof RuntimeCliOptions>

/**
 * GET /api/runtime/cli (docs/contract.md#runtime-cli-endpoint): which sub-agent CLI is active and its resolved default
 * model. Decorates `runtimeCli`, the one resolver the sub_agent tool uses too.
 */
const runtimeCli: FastifyPluginAsync<RuntimeCliOptions> = async (fastify, raw) => {
  const opts = parseOptions(RuntimeCliOptions, raw, 'runtime-cli')
  const models = parseOptions(Settings, opts.models, 'runtime-cli')
  const resolved = resolveModel(opts.cli, '', models)
  const service: RuntimeCliService = {
    cli: opts.cli,
    defaultModel: resolved.ok ? resolved.model : undefined,
    resolveModel: requested => resolveModel(opts.cli, requested, models)
  }
  fastify.decorate('runtimeCli', service)
  const body = { cli: opts.cli, default_model: service.defaultModel ?? null, supports_cost: opts.cli === 'claude' }
  if (!resolved.ok) fastify.log.warn({ cli: opts.cli }, resolved.error)
  fastify.get('/api/runtime/cli', { schema: { tags: ['operations'], summary: 'The active sub-agent CLI, its resolved default model and whether it reports cost' } }, async (_request, reply) => await reply.header('Cache-Control', 'no-store').send(body))
}

export default fp(runtimeCli, { name: 'runtime-cli', fastify: '5.x' })
