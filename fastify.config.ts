/*
 * THE manifest: which plugins load, in which order, with which options. Dependencies first; an
 * integrator adds one line `'their-plugin': config => entry(theirPlugin, options)` after what it
 * depends on (see docs/writing-a-plugin.md).
 * Each prompt tier is its own line: remove one and the others keep working. Tests load subsets by
 * name with `entries(config, [...])`, so every plugin's options are written here once.
 */
import type { AppConfig } from './core/config.js'
import { entry, type Entry } from './core/app.js'
import metrics from './plugins/metrics/index.js'
import mcpTransport from './plugins/mcp-transport/index.js'
import capabilities from './plugins/capabilities/index.js'
import chatStorage from './plugins/chat-storage/index.js'
import sandbox from './plugins/sandbox/index.js'
import workspaceTools from './plugins/workspace-tools/index.js'
import userSkills from './plugins/user-skills/index.js'
import promptRender from './plugins/prompt-render/index.js'
import uploads from './plugins/uploads/index.js'
import tierToolDescriptions from './plugins/tier-tool-descriptions/index.js'
import tierReadme from './plugins/tier-readme/index.js'
import tierStaticInstructions from './plugins/tier-static-instructions/index.js'
import tierDynamicInstructions from './plugins/tier-dynamic-instructions/index.js'
import tierResources from './plugins/tier-resources/index.js'
import tierHttp from './plugins/tier-http/index.js'
import files from './plugins/files/index.js'
import preview from './plugins/preview/index.js'
import cdpBridge from './plugins/cdp-bridge/index.js'
import terminal from './plugins/terminal/index.js'
import runtimeCli from './plugins/runtime-cli/index.js'
import subAgent, { subAgentEnvFromConfig } from './plugins/sub-agent/index.js'
import docs from './plugins/docs/index.js'
import oauth from './plugins/oauth/index.js'
import icons from './plugins/icons/index.js'
import { serverIcons } from './plugins/icons/icons.js'
import egress from './plugins/egress/index.js'
import ports from './plugins/ports/index.js'
import mcpApps from './plugins/mcp-apps/index.js'

/**
 * An engine plugin's entry: the one SANDBOX_ENGINE names registers, the other's registers nothing and
 * its modules are never loaded (the Kubernetes client is about 3 MiB of heap a Docker server does not need).
 */
function engine (config: AppConfig, name: 'docker' | 'kubernetes', load: () => Promise<Entry>): Entry {
  return { register: async app => { if (config.SANDBOX_ENGINE === name) await (await load()).register(app) } }
}

/**
 * Egress goes over the agent socket (docs/network.md#egress-over-the-agent-socket): only the Docker engine with
 * its agent socket offers it, and only with the network on. Then EGRESS_PORT inside each sandbox is its agent's
 * relay, never an app; otherwise (Kubernetes, SANDBOX_AGENT_SOCKET=false) it is a port like any other.
 */
export function egressRelayed (config: AppConfig): boolean {
  return config.SANDBOX_ENGINE === 'docker' && config.SANDBOX_AGENT && config.SANDBOX_AGENT_SOCKET && config.SANDBOX_EGRESS_SOCKET && config.ENABLE_NETWORK
}

const plugins = {
  // First: its HTTP hooks then cover every route registered after it.
  metrics: config => entry(metrics, { maxRunning: config.MAX_RUNNING_SANDBOXES }),
  'mcp-transport': config => entry(mcpTransport, {
    singleUserMode: config.singleUserMode,
    publicBaseUrl: config.publicBaseUrl,
    publicBaseUrlSet: config.publicBaseUrlSet,
    allowedOrigins: config.allowedOrigins,
    maxBodyBytes: config.MCP_MAX_BODY_BYTES,
    keepAliveMs: config.PROGRESS_INTERVAL_SECONDS * 1000,
    // Shutdown within CLOSE_GRACE_MS: calls get most of it to finish, then up to 3 s to stop.
    shutdownDrainMs: Math.max(0, config.CLOSE_GRACE_MS - 4000),
    shutdownCancelWaitMs: Math.min(3000, config.CLOSE_GRACE_MS),
    // The same secret on every server behind one URL (a retried 2026-07-28 call may reach another one).
    requestStateKey: config.LINK_SIGNING_KEY || config.MCP_API_KEY,
    // Served by the icons plugin below (GET /icons/…).
    serverIcons: serverIcons(config.publicBaseUrl)
  }),
  capabilities: config => entry(capabilities, {
    apiKey: config.MCP_API_KEY,
    signingKey: config.LINK_SIGNING_KEY,
    tokenTtlSeconds: config.LINK_TOKEN_TTL,
    publicBaseUrl: config.publicBaseUrl
  }),
  // Before every plugin that reads or writes chat data (uploads, outputs, state files).
  'chat-storage': config => entry(chatStorage, { dataDir: config.DATA_DIR }),
  // The sandbox engine first (it decorates fastify.sandboxEngine), then the engine-neutral core.
  // One engine loads: SANDBOX_ENGINE names it; the other's entry registers nothing.
  'sandbox-docker': config => engine(config, 'docker', async () => entry((await import('./plugins/sandbox-docker/index.js')).default, {
    dockerHost: config.DOCKER_HOST || config.DOCKER_SOCKET,
    // Where the chats' areas and the skills are, as the server and the daemon see them (docs/engine.md#storage).
    dataDir: config.DATA_DIR,
    dataDirHost: config.dataDirHost,
    skillsDirHost: config.SKILLS_DIR_HOST,
    // The agent socket's run directories (docs/engine.md#the-agent-socket), as the server and the daemon see them.
    agentRunDir: config.SANDBOX_AGENT && config.SANDBOX_AGENT_SOCKET ? `${config.DATA_DIR}/run` : '',
    agentRunDirHost: `${config.dataDirHost}/run`,
    // Egress over the same run directories, sandboxes with no network interface (docs/network.md#egress-over-the-agent-socket).
    egressSocket: config.SANDBOX_EGRESS_SOCKET
  })),
  'sandbox-kubernetes': config => engine(config, 'kubernetes', async () => entry((await import('./plugins/sandbox-kubernetes/index.js')).default, {
    apiUrl: config.KUBE_API_URL,
    namespace: config.KUBE_NAMESPACE,
    runtimeClassName: config.KUBE_RUNTIME_CLASS,
    storageClassName: config.KUBE_STORAGE_CLASS,
    volumeSize: config.KUBE_VOLUME_SIZE,
    serverSelector: config.KUBE_SERVER_SELECTOR,
    serverAddress: config.KUBE_SERVER_ADDRESS,
    maxStarting: config.KUBE_MAX_STARTING,
    sharedClaim: config.KUBE_SHARED_CLAIM,
    dataDir: config.DATA_DIR,
    skillsDir: config.SKILLS_DIR,
    uid: config.SANDBOX_UID > 0 ? config.SANDBOX_UID : 1000,
    gid: config.SANDBOX_GID > 0 ? config.SANDBOX_GID : 1000
  })),
  sandbox: config => entry(sandbox, {
    image: config.DOCKER_IMAGE,
    prefix: config.SANDBOX_PREFIX,
    network: config.sandboxNetwork,
    enableNetwork: config.ENABLE_NETWORK,
    agent: config.SANDBOX_AGENT,
    agentBytesPerSecond: config.SANDBOX_AGENT_MAX_BYTES_PER_SECOND,
    dataDir: config.DATA_DIR,
    memLimit: config.CONTAINER_MEM_LIMIT,
    cpuLimit: config.CONTAINER_CPU_LIMIT,
    pidsLimit: config.CONTAINER_PIDS_LIMIT,
    diskLimit: config.SANDBOX_DISK_LIMIT,
    createTimeoutS: config.CONTAINER_CREATE_TIMEOUT,
    idleTimeoutS: config.CONTAINER_IDLE_TIMEOUT,
    pausedTimeoutS: config.CONTAINER_PAUSED_TIMEOUT,
    maxAgeHours: config.CONTAINER_MAX_AGE_HOURS,
    dataMaxAgeDays: config.DATA_MAX_AGE_DAYS,
    maxRunning: config.MAX_RUNNING_SANDBOXES,
    poolSize: config.sandboxPoolSize,
    leaseTimeoutS: config.SANDBOX_LEASE_TIMEOUT,
    commandTimeoutS: config.COMMAND_TIMEOUT,
    uid: config.SANDBOX_UID,
    gid: config.SANDBOX_GID
  }),
  egress: config => entry(egress, {
    mode: config.EGRESS as 'open' | 'allowlist' | 'off',
    allow: config.EGRESS_ALLOW,
    port: config.EGRESS_PORT,
    maxConnectionsPerChat: config.EGRESS_MAX_CONNECTIONS,
    maxBytesPerSecond: config.EGRESS_MAX_BYTES_PER_SECOND,
    dnsServers: config.EGRESS_DNS_SERVERS,
    idleTimeoutS: config.EGRESS_IDLE_TIMEOUT,
    firewall: config.EGRESS_FIREWALL,
    users: config.EGRESS_USERS
  }),
  'workspace-tools': config => entry(workspaceTools, {
    commandTimeoutS: config.COMMAND_TIMEOUT,
    createTimeoutS: config.CONTAINER_CREATE_TIMEOUT,
    maxOutputChars: config.MAX_OUTPUT_CHARS,
    progressIntervalS: config.PROGRESS_INTERVAL_SECONDS
  }),
  'runtime-cli': config => entry(runtimeCli, {
    cli: config.subagentCli,
    models: {
      SUB_AGENT_DEFAULT_MODEL: config.SUB_AGENT_DEFAULT_MODEL,
      CODEX_SUB_AGENT_DEFAULT_MODEL: config.CODEX_SUB_AGENT_DEFAULT_MODEL,
      CODEX_MODEL: config.CODEX_MODEL,
      OPENCODE_SUB_AGENT_DEFAULT_MODEL: config.OPENCODE_SUB_AGENT_DEFAULT_MODEL,
      OPENCODE_MODEL: config.OPENCODE_MODEL,
      ANTHROPIC_DEFAULT_SONNET_MODEL: config.ANTHROPIC_DEFAULT_SONNET_MODEL,
      ANTHROPIC_DEFAULT_OPUS_MODEL: config.ANTHROPIC_DEFAULT_OPUS_MODEL,
      ANTHROPIC_DEFAULT_HAIKU_MODEL: config.ANTHROPIC_DEFAULT_HAIKU_MODEL
    }
  }),
  'sub-agent': config => entry(subAgent, {
    cli: config.subagentCli,
    timeoutS: config.SUB_AGENT_TIMEOUT,
    maxTurns: config.SUB_AGENT_MAX_TURNS,
    createTimeoutS: config.CONTAINER_CREATE_TIMEOUT,
    maxOutputChars: config.MAX_OUTPUT_CHARS,
    progressIntervalS: config.PROGRESS_INTERVAL_SECONDS,
    networkEnabled: config.ENABLE_NETWORK,
    // Provider credentials reach a sandbox only here, in the environment of each sub_agent run.
    cliEnv: subAgentEnvFromConfig(config)
  }),
  'user-skills': config => entry(userSkills, {
    tokensUrl: config.MCP_TOKENS_URL,
    tokensApiKey: config.MCP_TOKENS_API_KEY,
    tokensUrlAllow: config.mcpTokensUrlAllow,
    cacheDir: config.skillsCacheDir,
    cacheHostDir: config.skillsCacheHostDir,
    cacheMaxBytes: config.SKILLS_CACHE_MAX_BYTES
  }),
  'prompt-render': config => entry(promptRender, {
    singleUserMode: config.singleUserMode,
    skillsDir: config.SKILLS_DIR,
    includeExamples: config.SKILLS_INCLUDE_EXAMPLES,
    commandTimeoutSeconds: config.COMMAND_TIMEOUT,
    subagentCli: config.subagentCli,
    networkEnabled: config.ENABLE_NETWORK
  }),
  uploads: config => entry(uploads, { maxBytes: config.UPLOAD_MAX_BYTES }),
  'tier-tool-descriptions': config => entry(tierToolDescriptions, {}),
  'tier-readme': config => entry(tierReadme, {}),
  'tier-static-instructions': config => entry(tierStaticInstructions, {}),
  'tier-dynamic-instructions': config => entry(tierDynamicInstructions, {}),
  'tier-resources': config => entry(tierResources, { maxReadBytes: config.RESOURCE_READ_MAX_BYTES }),
  'tier-http': config => entry(tierHttp, { singleUserMode: config.singleUserMode }),
  files: config => entry(files, { archiveMaxBytes: config.ARCHIVE_MAX_BYTES, frameAncestors: config.FRAME_ANCESTORS }),
  'cdp-bridge': config => entry(cdpBridge, { cdpPort: config.CDP_PORT, publicBaseUrl: config.publicBaseUrl }),
  preview: config => entry(preview, { frameAncestors: config.FRAME_ANCESTORS }),
  terminal: config => entry(terminal, {
    cli: config.subagentCli,
    maxViewers: config.TERMINAL_MAX_VIEWERS
  }),
  // App preview URLs: /apps/<chat>/<port>/ relayed into the sandbox; after workspace-tools (its bash_tool notes).
  ports: config => entry(ports, {
    publicBaseUrl: config.publicBaseUrl,
    appsDomain: config.APPS_DOMAIN,
    maxConnectionsPerChat: config.APPS_MAX_CONNECTIONS,
    maxRequestBytes: config.APPS_MAX_REQUEST_BYTES,
    maxResponseBytes: config.APPS_MAX_RESPONSE_BYTES,
    headersTimeoutS: config.APPS_TIMEOUT,
    idleTimeoutS: config.APPS_IDLE_TIMEOUT,
    // The browser's debugging port, and the egress relay's port inside a sandbox without a network (docs/network.md#egress-over-the-agent-socket).
    hiddenPorts: [config.CDP_PORT, ...(egressRelayed(config) ? [config.EGRESS_PORT] : [])]
  }),
  // MCP Apps: the preview's views inside the chat, for clients that declare the extension; others see no change.
  'mcp-apps': config => entry(mcpApps, {}),
  docs: config => entry(docs, { publicBaseUrl: config.publicBaseUrl, singleUserMode: config.singleUserMode }),
  // The server's and the tools' icons, and `icons` on each built-in tool of tools/list.
  icons: config => entry(icons, { publicBaseUrl: config.publicBaseUrl }),
  oauth: config => entry(oauth, {
    enabled: config.OAUTH_ENABLED,
    publicBaseUrl: config.publicBaseUrl,
    keyLogin: config.OAUTH_KEY_LOGIN,
    accessTokenTtlS: config.OAUTH_ACCESS_TOKEN_TTL,
    refreshTokenTtlS: config.OAUTH_REFRESH_TOKEN_TTL,
    oidcIssuer: config.OIDC_ISSUER.trim(),
    oidcClientId: config.OIDC_CLIENT_ID.trim(),
    oidcClientSecret: config.OIDC_CLIENT_SECRET,
    oidcAllowedEmails: config.oidcAllowedEmails
  })
} satisfies Record<string, (config: AppConfig) => Entry>

export type PluginName = keyof typeof plugins

/** Every plugin of the manifest, in order. */
export const pluginNames = Object.keys(plugins) as PluginName[]

/** The named entries in manifest order. */
export function entries (config: AppConfig, names: readonly PluginName[]): Entry[] {
  return (Object.keys(plugins) as PluginName[]).filter(name => names.includes(name)).map(name => plugins[name](config))
}

export default function manifest (config: AppConfig): Entry[] {
  return (Object.keys(plugins) as PluginName[]).map(name => plugins[name](config))
}
