import type { AppConfig, SubagentCli } from '../../core/config.js'
import type { RequestUser } from '../../core/identity.js'

/*
 * What enters a sandbox (docs/architecture.md#security-model). Provider credentials (the active CLI's row and the
 * vision settings) are given only to the processes of a `sub_agent` run, in that exec's own
 * environment: fastify.config.ts turns the config into the sub-agent's `cliEnv` once. A container's
 * environment, and so PID 1, the in-sandbox agent, bash_tool commands and terminal shells, carries
 * only the per-chat variables and the proxy settings; any code the model runs can read those.
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

/** Server secrets that never enter a sandbox, whatever a caller passes. */
export const NEVER_IN_SANDBOX: readonly string[] = ['MCP_API_KEY', 'LINK_SIGNING_KEY', 'MCP_TOKENS_API_KEY']

export const VISION_VARS: readonly string[] = ['VISION_API_KEY', 'VISION_API_URL', 'VISION_MODEL']

export const OPENCODE_CONFIG_PATH = '/tmp/opencode.json'
const DEFAULT_ANTHROPIC_BASE_URL = 'https://api.anthropic.com'

/**
 * Names only a `sub_agent` run may carry: every CLI's row, OPENCODE_CONFIG and the vision settings.
 * They never enter a container's own environment, whatever a caller passes (containerEnvList).
 */
export const RUN_ONLY: ReadonlySet<string> = new Set([...Object.values(CLI_ALLOWLIST).flat(), 'OPENCODE_CONFIG', ...VISION_VARS])

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
  for (const name of NEVER_IN_SANDBOX) Reflect.deleteProperty(env, name)
  return env
}

/** The per-chat variables of docs/contract.md#sandbox-layout: identity, git author/committer and GitLab when known. */
export function chatEnv (chatId: string, subagentCli: string, user: RequestUser | undefined): Record<string, string> {
  const env: Record<string, string> = { CHAT_ID: chatId, SUBAGENT_CLI: subagentCli }
  if (user?.name !== undefined && user.name !== '') {
    env.GIT_AUTHOR_NAME = user.name
    env.GIT_COMMITTER_NAME = user.name
  }
  if (user?.email !== undefined && user.email !== '') {
    env.GIT_AUTHOR_EMAIL = user.email
    env.GIT_COMMITTER_EMAIL = user.email
  }
  const token = user?.credentials.gitlabToken
  if (token !== undefined && token !== '') {
    env.GITLAB_TOKEN = token
    env.GITLAB_HOST = user?.credentials.gitlabHost ?? 'gitlab.com'
  } else if (user?.credentials.gitlabHost !== undefined) {
    env.GITLAB_HOST = user.credentials.gitlabHost
  }
  return env
}

/**
 * Merges environment layers into Docker's `KEY=value` list: later layers win, empty values and the
 * server's secrets are dropped, names must be plain identifiers.
 */
export function toEnvList (...layers: Array<Record<string, string> | undefined>): string[] {
  const merged = new Map<string, string>()
  for (const layer of layers) {
    if (layer === undefined) continue
    for (const [name, value] of Object.entries(layer)) {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) || NEVER_IN_SANDBOX.includes(name)) continue
      if (typeof value !== 'string' || value === '') { merged.delete(name); continue }
      merged.set(name, value)
    }
  }
  return [...merged].map(([name, value]) => `${name}=${value}`)
}

/** toEnvList for a container's own environment: provider credentials (RUN_ONLY) are dropped from every layer. */
export function containerEnvList (...layers: Array<Record<string, string> | undefined>): string[] {
  return toEnvList(...layers).filter(item => !RUN_ONLY.has(item.slice(0, item.indexOf('='))))
}
