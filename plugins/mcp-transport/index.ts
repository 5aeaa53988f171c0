import { createHmac, randomBytes } from 'node:crypto'
import fp from 'fastify-plugin'
import { createRequestStateCodec } from '@modelcontextprotocol/server'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import { OPEN_WEBUI_CHAT_ID_SWITCH } from '../../core/identity.js'
import { requireKey } from '../../core/route-kit.js'
import { SERVER_NAME, SERVER_VERSION } from '../../core/version.js'
import { createMcpRegistry } from './registry.js'
import { createToolRunner } from './tool-call.js'
import { createClientRequests } from './client-requests.js'
import { createModernLeg } from './modern.js'
import type { SealedState } from './server-factory.js'
import { McpTransportOptions } from './schemas.js'
import mcpRoutes from './routes.js'

/**
 * MCP over Streamable HTTP, stateless (docs/contract.md#mcp-endpoint). Other plugins contribute tools, resources and
 * instructions through the `mcp` registry; none of them touches the SDK's server objects.
 */
const mcpTransport: FastifyPluginAsync<McpTransportOptions> = async (fastify, raw) => {
  const opts = parseOptions(McpTransportOptions, raw, 'mcp-transport')
  const registry = createMcpRegistry()
  let lastLenientWarn = 0
  const runner = createToolRunner(registry, {
    maxCallsPerChat: opts.maxCallsPerChat,
    onLenient: ctx => {
      if (Date.now() - lastLenientWarn < opts.lenientWarnIntervalMs) return
      lastLenientWarn = Date.now()
      ctx.log.warn({ openWebUiSwitch: OPEN_WEBUI_CHAT_ID_SWITCH },
        'a tool call without a chat id ran in the shared default sandbox, which every such chat of every user shares: ' +
        `with Open WebUI's native MCP connection, start Open WebUI with ${OPEN_WEBUI_CHAT_ID_SWITCH} (it then sends X-OpenWebUI-Chat-Id); ` +
        'other clients must send X-Chat-Id; or set SINGLE_USER_MODE (true: one shared sandbox on purpose, false: chat id required)')
    }
  })
  const clientRequests = createClientRequests({ maxPerChat: 4, maxTotal: 1000 })
  fastify.decorate('mcp', registry)
  fastify.addHook('onReady', async () => { registry.seal() })
  // Graceful shutdown: Fastify already answers new requests with 503 here; running calls finish or are
  // stopped and answered within shutdownDrainMs + shutdownCancelWaitMs. Sandboxes are left running.
  // The 2026-07-28 leg's listen streams end after the drain (its calls run through the same runner).
  // 2026-07-28 requestState (a tool's state while the client asks the human): HMAC-sealed with a key derived
  // from requestStateKey (the same on every server behind one URL), else random (one process serves every round).
  const stateKey = opts.requestStateKey === '' ? randomBytes(32) : createHmac('sha256', opts.requestStateKey).update('cubicle/request-state/v1').digest()
  const requestState = createRequestStateCodec<SealedState>({ key: stateKey, ttlSeconds: 900 })
  const modern = createModernLeg({ registry, runner, opts, serverIcons: opts.serverIcons, requestState, log: fastify.log.child({ plugin: 'mcp-transport' }) })
  fastify.addHook('preClose', async () => {
    clientRequests.close()
    await runner.drain(opts.shutdownDrainMs, opts.shutdownCancelWaitMs)
    // CLOSE_GRACE_MS leaves 1 s after the drain and the stop (fastify.config.ts): answers flush within it.
    await modern.close(Math.min(1000, opts.shutdownCancelWaitMs))
  })

  await fastify.register(mcpRoutes, { deps: { registry, runner, opts, modern, clientRequests, serverIcons: opts.serverIcons, requestState } })

  fastify.get('/mcp-info', { schema: { tags: ['mcp'], summary: 'Server name, version, tools and the headers /mcp reads (JSON)' } }, async (request, reply) => {
    await requireKey(request, reply)
    return {
      name: SERVER_NAME,
      version: SERVER_VERSION,
      description: 'Per-chat sandbox computers over MCP: each chat (X-Chat-Id) gets its own isolated Linux sandbox with a persistent home, shell, file tools and published outputs.',
      tools: registry.listTools().map(t => ({ name: t.name, description: t.description })),
      headers: {
        required: ['X-Chat-Id'],
        optional: ['X-User-Email', 'X-User-Name', 'X-Gitlab-Token', 'X-Gitlab-Host', 'X-Anthropic-Api-Key', 'X-Anthropic-Base-Url', 'X-Mcp-Servers']
      }
    }
  })
}

export default fp(mcpTransport, { name: 'mcp-transport', fastify: '5.x', decorators: { fastify: ['auth'] } })
