/*
 * THE manifest: which plugins load, in which order, with which options. Dependencies first; an
 * integrator adds `entry(theirPlugin, options)` after what it depends on (see README "Writing a plugin").
 * Each prompt tier is its own line: remove one and the others keep working.
 */
import type { AppConfig } from './core/config.js'
import { entry, type Entry } from './core/app.js'
import mcpTransport from './plugins/mcp-transport/index.js'
import capabilities from './plugins/capabilities/index.js'
import sandboxDocker, { sandboxEnvFromConfig } from './plugins/sandbox-docker/index.js'
import workspaceTools from './plugins/workspace-tools/index.js'
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
import docs from './plugins/docs/index.js'

export default function manifest (config: AppConfig): Entry[] {
  return [
    entry(mcpTransport, {
      apiKeyRequired: config.MCP_API_KEY !== '',
      singleUserMode: config.singleUserMode,
      publicBaseUrl: config.publicBaseUrl,
      allowedOrigins: config.allowedOrigins,
      maxBodyBytes: config.MCP_MAX_BODY_BYTES,
      keepAliveMs: config.PROGRESS_INTERVAL_SECONDS * 1000
    }),
    entry(capabilities, {
      apiKey: config.MCP_API_KEY,
      signingKey: config.LINK_SIGNING_KEY,
      tokenTtlSeconds: config.LINK_TOKEN_TTL,
      publicBaseUrl: config.publicBaseUrl
    }),
    entry(sandboxDocker, {
      dockerHost: config.DOCKER_HOST || config.DOCKER_SOCKET,
      image: config.DOCKER_IMAGE,
      prefix: config.SANDBOX_PREFIX,
      network: config.sandboxNetwork,
      enableNetwork: config.ENABLE_NETWORK,
      dataDir: config.DATA_DIR,
      dataDirHost: config.dataDirHost,
      memLimit: config.CONTAINER_MEM_LIMIT,
      cpuLimit: config.CONTAINER_CPU_LIMIT,
      pidsLimit: config.CONTAINER_PIDS_LIMIT,
      createTimeoutS: config.CONTAINER_CREATE_TIMEOUT,
      idleTimeoutS: config.CONTAINER_IDLE_TIMEOUT,
      maxAgeHours: config.CONTAINER_MAX_AGE_HOURS,
      dataMaxAgeDays: config.DATA_MAX_AGE_DAYS,
      maxRunning: config.MAX_RUNNING_SANDBOXES,
      commandTimeoutS: config.COMMAND_TIMEOUT,
      uid: config.SANDBOX_UID,
      gid: config.SANDBOX_GID,
      skillsDirHost: config.SKILLS_DIR_HOST,
      subagentCli: config.subagentCli,
      sandboxEnv: sandboxEnvFromConfig(config)
    }),
    entry(workspaceTools, {
      commandTimeoutS: config.COMMAND_TIMEOUT,
      createTimeoutS: config.CONTAINER_CREATE_TIMEOUT,
      maxOutputChars: config.MAX_OUTPUT_CHARS,
      progressIntervalS: config.PROGRESS_INTERVAL_SECONDS,
      dataDir: config.DATA_DIR
    }),
    entry(promptRender, {
      singleUserMode: config.singleUserMode,
      skillsDir: config.SKILLS_DIR,
      includeExamples: config.SKILLS_INCLUDE_EXAMPLES,
      commandTimeoutSeconds: config.COMMAND_TIMEOUT,
      subagentCli: config.subagentCli,
      networkEnabled: config.ENABLE_NETWORK
    }),
    entry(uploads, { dataDir: config.DATA_DIR, maxBytes: config.UPLOAD_MAX_BYTES }),
    entry(tierToolDescriptions, {}),
    entry(tierReadme, {}),
    entry(tierStaticInstructions, {}),
    entry(tierDynamicInstructions, {}),
    entry(tierResources, { maxReadBytes: config.RESOURCE_READ_MAX_BYTES }),
    entry(tierHttp, { singleUserMode: config.singleUserMode }),
    entry(files, { dataDir: config.DATA_DIR, archiveMaxBytes: config.ARCHIVE_MAX_BYTES, frameAncestors: config.FRAME_ANCESTORS }),
    entry(preview, { frameAncestors: config.FRAME_ANCESTORS }),
    entry(docs, { publicBaseUrl: config.publicBaseUrl, singleUserMode: config.singleUserMode })
  ]
}
