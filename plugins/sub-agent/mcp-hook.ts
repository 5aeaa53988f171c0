import type { FastifyBaseLogger } from 'fastify'
import type { EnsureHook, SandboxService } from '../sandbox/types.js'
import { anthropicBaseUrl, MCP_CONFIG_PATH, mcpConfig, mcpServerNames, SANDBOX_HOME } from './credentials.js'
import { parseSetup, setupArgv, tarOf } from './setup.js'

/**
 * docs/contract.md#sub-agent-mcp-servers "written at creation": when a claude sandbox starts for a caller that named MCP servers
 * (X-Mcp-Servers), ~/.mcp.json and ~/.claude/settings.local.json are written at once, so claude
 * started from the terminal finds them too. Every sub_agent run writes them again before it starts.
 */
export function mcpHook (sandbox: SandboxService, cliEnv: Readonly<Record<string, string>>, log: FastifyBaseLogger): EnsureHook {
  return async (box, event) => {
    if (!event.started || event.user === undefined) return
    const names = mcpServerNames(event.user)
    if (names.length === 0) return
    const content = mcpConfig(names, anthropicBaseUrl(cliEnv, event.user), event.user.email)
    const r = await sandbox.exec(box.chatId, setupArgv(SANDBOX_HOME, 'sh', names), {
      stdin: await tarOf([{ path: MCP_CONFIG_PATH, content }]), timeoutMs: 30_000, maxBytes: 16 * 1024
    })
    const { status, detail } = parseSetup(r.stdout.toString('utf8'))
    if (status !== 'ok') log.warn({ chatId: box.chatId, status, detail }, 'could not write the sub-agent MCP configuration')
  }
}
