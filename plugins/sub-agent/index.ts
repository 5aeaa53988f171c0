import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import { SubAgentOptions } from './schemas.js'
import { createSubAgentTool } from './tool.js'
import { createRunRegistry, createSubAgentService } from './service.js'
import { createProbe } from '../../core/sandbox-probe.js'
import { SUB_AGENT_SANDBOX_TIMEOUT } from './errors.js'
import { mcpHook } from './mcp-hook.js'
import { subAgentEnvContributor } from './env.js'
import type { PlanDeps } from './plan.js'
import type {} from '../mcp-transport/types.js'
import type {} from '../capabilities/types.js'
import type {} from '../runtime-cli/types.js'
import type {} from '../prompt-render/types.js'

/**
 * The fifth tool, sub_agent (docs/contract.md#tools, docs/contract.md#skills-and-sub-agent): delegates a task to the active coding-agent
 * CLI inside the chat's sandbox. Decorates `subAgent`, which the terminal routes of docs/contract.md#terminal use to list
 * and kill the active CLI's sessions and processes.
 */
const subAgent: FastifyPluginAsync<SubAgentOptions> = async (fastify, raw) => {
  const opts = parseOptions(SubAgentOptions, raw, 'sub-agent')
  const log = fastify.log.child({ plugin: 'sub-agent' })
  const { sandbox, links, runtimeCli } = fastify
  if (runtimeCli.cli !== opts.cli) throw new TypeError(`sub-agent: cli '${opts.cli}' differs from runtime-cli's '${runtimeCli.cli}'`)
  const deps: PlanDeps = {
    sandbox,
    links,
    runtimeCli,
    log,
    // The prompt renderer is optional: without it the sub-agent's prompt lists no skills.
    skills: async email => fastify.hasDecorator('prompts') ? await fastify.prompts.skills(email) : []
  }
  const runs = createRunRegistry(opts.maxRunsPerChat)
  fastify.mcp.addTool(createSubAgentTool(deps, opts, runs))
  fastify.decorate('subAgent', createSubAgentService({ sandbox, probe: createProbe(sandbox.openStream, 4, 'sub-agent', () => new SUB_AGENT_SANDBOX_TIMEOUT()), log }, opts, runs))
  if (opts.cli === 'claude') sandbox.onEnsure(mcpHook(sandbox, opts.cliEnv, log))
  // SUBAGENT_CLI in every sandbox; provider credentials kept out of it (only each run's exec carries them).
  sandbox.addEnvContributor?.(subAgentEnvContributor(opts.cli))
}

export { subAgentEnvFromConfig } from './env.js'

export default fp(subAgent, {
  name: 'sub-agent',
  fastify: '5.x',
  dependencies: ['mcp-transport', 'sandbox', 'capabilities', 'runtime-cli'],
  decorators: { fastify: ['mcp', 'sandbox', 'links', 'runtimeCli'] }
})
