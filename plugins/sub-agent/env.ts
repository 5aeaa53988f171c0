import type { AppConfig, SubagentCli } from '../../core/config.js'
import type { EnvContributor } from '../sandbox/types.js'
import { DEFAULT_ANTHROPIC_BASE_URL, OPENCODE_CONFIG_PATH } from './credentials.js'

/*
 * The sub-agent's part of what enters a sandbox (docs/architecture.md#security-model, docs/engine.md#environment).
 * Provider credentials (the active CLI's row and the vision settings) are given only to the processes
 * of a `sub_agent` run, in that exec's own environment: fastify.config.ts turns the config into the
 * plugin's `cliEnv` once. The plugin contributes SUBAGENT_CLI to every sandbox's own environment and
 * withholds every provider name from it (the sandbox core drops them from any layer), so PID 1, the
 * in-sandbox agent, bash_tool commands and terminal shells never carry a provider key.
 */

/** The variables each CLI's `sub_agent` runs receive (only non-empty values are passed). */
export const CLI_ALLOWLIST: Record<SubagentCli, readonly string[]> = {
  claude: [
    'ANTHROPIC_AUTH_TOKEN', 'ANTHROPIC_BASE_URL', 'ANTHROPIC_CUSTOM_HEADERS', 'ANTHROPIC_MODEL',
    'ANTHROPIC_DEFAULT_SONNET_MODEL', 'ANTHROPIC_DEFAULT_OPUS_MODEL', 'ANTHROPIC_DEFAULT_HAIKU_MODEL',
    'CLAUDE_CODE_SUBAGENT_MODEL', 'CLAUDE_CODE_DISABLE_EXPERIMENTAL_BETAS', 'DISABLE_PROMPT_CACHING',
    'DISABLE_PROMPT_CACHING_SONNET', 'DISABLE_PROMPT_CACHING_OPUS', 'DISABLE_PROMPT_CACHING_HAIKU'
  ],
  codex: [
    'OPENAI_API_KEY', 'OPENAI_BASE_URL', 'CODEX_MODEL', 'AZURE_OPENAI_API_KEY', 'AZURE_OPENAI_ENDPOINT',
    'AZURE_OPENAI_API_VERSION', 'CODEX_CONFIG_EXTRA'
  ],
  opencode: ['OPENROUTER_API_KEY', 'OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'OPENCODE_MODEL', 'OPENCODE_CONFIG_EXTRA']
}

export const VISION_VARS: readonly string[] = ['VISION_API_KEY', 'VISION_API_URL', 'VISION_MODEL']

/**
 * Names only a `sub_agent` run may carry: every CLI's row, OPENCODE_CONFIG and the vision settings.
 * Withheld from every sandbox's own environment (subAgentEnvContributor).
 */
export const RUN_ONLY: readonly string[] = [...new Set([...Object.values(CLI_ALLOWLIST).flat(), 'OPENCODE_CONFIG', ...VISION_VARS])]

/**
 * The config-derived environment of a `sub_agent` run: the active CLI's allowlist and the vision
 * settings when VISION_API_KEY is set. Empty values are left out; SUBAGENT_CLI is added per run.
 */
export function subAgentEnvFromConfig (config: AppConfig): Record<string, string> {
  const source = config as unknown as Record<string, unknown>
  const get = (name: string): string => {
    const v = source[name]
    return typeof v === 'string' ? v.trim() : ''
  }
  const env: Record<string, string> = {}
  for (const name of CLI_ALLOWLIST[config.subagentCli]) {
    const value = get(name)
    if (value !== '') env[name] = value
  }
  if (config.subagentCli === 'claude' && env.ANTHROPIC_AUTH_TOKEN !== undefined && env.ANTHROPIC_BASE_URL === undefined) {
    env.ANTHROPIC_BASE_URL = DEFAULT_ANTHROPIC_BASE_URL
  }
  if (config.subagentCli === 'opencode') env.OPENCODE_CONFIG = OPENCODE_CONFIG_PATH
  if (get('VISION_API_KEY') !== '') {
    for (const name of VISION_VARS) {
      const value = get(name)
      if (value !== '') env[name] = value
    }
  }
  return env
}

/** What the plugin adds to every sandbox's own environment: SUBAGENT_CLI; provider credentials withheld. */
export function subAgentEnvContributor (cli: SubagentCli): EnvContributor {
  return { names: ['SUBAGENT_CLI'], withheld: RUN_ONLY, env: () => ({ SUBAGENT_CLI: cli }) }
}
