import type { SubagentCli } from '../../core/config.js'
import type { RequestUser } from '../../core/identity.js'

/*
 * Each run's environment and the CLI configuration written before it (docs/contract.md#sub-agent-mcp-servers, docs/contract.md#credential-allowlist).
 * `cliEnv` is the server's allowlisted row of the active CLI (subAgentEnvFromConfig: the only way provider credentials enter a sandbox); request headers
 * add per-exec credentials (docs/contract.md#creation) that never touch the container's own environment.
 */

export const DEFAULT_ANTHROPIC_BASE_URL = 'https://api.anthropic.com'
export const OPENCODE_CONFIG_PATH = '/tmp/opencode.json'
export const CODEX_PROFILE = 'cubicle'
export const SANDBOX_HOME = '/home/assistant'
export const MCP_CONFIG_PATH = `${SANDBOX_HOME}/.mcp.json`
export const CODEX_PROFILE_PATH = `${SANDBOX_HOME}/.codex/${CODEX_PROFILE}.config.toml`

/** MCP server names never handed to the sub-agent (docs/contract.md#sub-agent-mcp-servers): Docker's AI gateway and this server itself. */
const MCP_BLOCKLIST = new Set(['docker_ai', 'docker-ai', 'computer-use-mcp'])

/** Non-secret switches for unattended runs: no self-update, no telemetry, no background network chatter. */
const QUIET: Record<SubagentCli, Record<string, string>> = {
  claude: { DISABLE_AUTOUPDATER: '1', CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', DISABLE_TELEMETRY: '1', DISABLE_ERROR_REPORTING: '1' },
  codex: {},
  opencode: { OPENCODE_DISABLE_AUTOUPDATE: '1', OPENCODE_DISABLE_SHARE: '1' }
}

export interface RunEnvInput {
  cli: SubagentCli
  cliEnv: Readonly<Record<string, string>>
  user: RequestUser
  networkEnabled: boolean
}

/** The Anthropic endpoint a claude run talks to: the header's (only with the header's key, docs/contract.md#request-headers), else the server's. */
export function anthropicBaseUrl (cliEnv: Readonly<Record<string, string>>, user: RequestUser): string {
  const fromHeader = user.credentials.anthropicApiKey !== undefined ? user.credentials.anthropicBaseUrl : undefined
  return fromHeader ?? (cliEnv.ANTHROPIC_BASE_URL !== undefined && cliEnv.ANTHROPIC_BASE_URL !== '' ? cliEnv.ANTHROPIC_BASE_URL : DEFAULT_ANTHROPIC_BASE_URL)
}

/** The per-exec environment of a run: only the active CLI's row (docs/contract.md#credential-allowlist), header credentials winning. */
export function runEnv (v: RunEnvInput): Record<string, string> {
  const env: Record<string, string> = { ...v.cliEnv, ...QUIET[v.cli], SUBAGENT_CLI: v.cli }
  const key = v.user.credentials.anthropicApiKey
  if (v.cli === 'claude') {
    if (key !== undefined) {
      env.ANTHROPIC_AUTH_TOKEN = key
      env.ANTHROPIC_BASE_URL = anthropicBaseUrl(v.cliEnv, v.user)
    }
    if (v.user.email !== undefined) env.ANTHROPIC_CUSTOM_HEADERS = `x-openwebui-user-email: ${v.user.email}`
  }
  if (v.cli === 'opencode') {
    if (key !== undefined) env.ANTHROPIC_API_KEY = key
    env.OPENCODE_CONFIG = OPENCODE_CONFIG_PATH
    // Without egress the model catalogue fetch and LSP downloads would each stall the run on a timeout.
    if (!v.networkEnabled) Object.assign(env, { OPENCODE_DISABLE_MODELS_FETCH: '1', OPENCODE_DISABLE_LSP_DOWNLOAD: '1' })
  }
  return env
}

/** Values of a run environment that must never appear in a result. */
export function secretsOf (env: Readonly<Record<string, string>>): string[] {
  return Object.entries(env).filter(([name]) => /KEY|TOKEN|SECRET|PASSWORD/.test(name)).map(([, value]) => value)
}

/** The validated X-Mcp-Servers names minus the blocklist (docs/contract.md#sub-agent-mcp-servers). */
export const mcpServerNames = (user: RequestUser): string[] => user.mcpServers.filter(n => !MCP_BLOCKLIST.has(n))

/**
 * ~/.mcp.json for claude (docs/contract.md#sub-agent-mcp-servers): each name behind the Anthropic gateway at `<base>/mcp/<name>`, with the
 * user's email and the gateway token, which claude expands from its environment (never written here).
 */
export function mcpConfig (names: readonly string[], baseUrl: string, email: string | undefined): string {
  const base = baseUrl.replace(/\/+$/, '')
  const servers: Record<string, unknown> = {}
  for (const name of names) {
    servers[name] = {
      type: 'http',
      url: `${base}/mcp/${name}`,
      headers: { ...(email !== undefined && { 'x-openwebui-user-email': email }), Authorization: 'Bearer ${ANTHROPIC_AUTH_TOKEN}' }
    }
  }
  return JSON.stringify({ mcpServers: servers }, null, 2) + '\n'
}

type JsonObject = Record<string, unknown>
const isPlain = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v)

/** Deep merge of plain objects; `extra` wins. */
function merge (base: JsonObject, extra: JsonObject): JsonObject {
  const out: JsonObject = { ...base }
  for (const [k, v] of Object.entries(extra)) out[k] = isPlain(v) && isPlain(out[k]) ? merge(out[k] as JsonObject, v) : v
  return out
}

/**
 * /tmp/opencode.json (OPENCODE_CONFIG, docs/contract.md#credential-allowlist): no sharing or self-update (permissions are granted by
 * `run --auto`), the header's Anthropic endpoint when given, then OPENCODE_CONFIG_EXTRA
 * (a JSON object) merged over it. Returns the text and whether the extra config was unusable.
 */
export function opencodeConfig (cliEnv: Readonly<Record<string, string>>, user: RequestUser): { text: string, extraInvalid: boolean } {
  let config: JsonObject = { $schema: 'https://opencode.ai/config.json', autoupdate: false, share: 'disabled' }
  const headerUrl = user.credentials.anthropicApiKey !== undefined ? user.credentials.anthropicBaseUrl : undefined
  if (headerUrl !== undefined) config = merge(config, { provider: { anthropic: { options: { baseURL: headerUrl } } } })
  let extraInvalid = false
  const extra = cliEnv.OPENCODE_CONFIG_EXTRA
  if (extra !== undefined && extra.trim() !== '') {
    try {
      const parsed: unknown = JSON.parse(extra)
      if (isPlain(parsed)) config = merge(config, parsed)
      else extraInvalid = true
    } catch { extraInvalid = true }
  }
  return { text: JSON.stringify(config, null, 2) + '\n', extraInvalid }
}

/** CODEX_CONFIG_EXTRA (TOML) becomes a profile layered over ~/.codex/config.toml, which stays the user's own. */
export function codexProfile (cliEnv: Readonly<Record<string, string>>): string | undefined {
  const extra = cliEnv.CODEX_CONFIG_EXTRA
  return extra !== undefined && extra.trim() !== '' ? extra.replace(/\r\n?/g, '\n').trimEnd() + '\n' : undefined
}
