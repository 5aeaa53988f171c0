import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import type {} from '@fastify/swagger'
import { parseOptions } from '../../core/config.js'
import { requireKey } from '../../core/route-kit.js'
import type {} from '../mcp-transport/types.js'
import type {} from '../sandbox/types.js'
import { createCollectors } from './collectors.js'
import { observeHttp } from './http.js'
import { observeSandboxes } from './sandboxes.js'
import { MetricsOptions } from './schemas.js'

/**
 * GET /metrics in the Prometheus text format (prom-client): HTTP requests, latency and bytes per route
 * pattern, auth failures, tool calls per tool and outcome, tool latency, MCP requests without a chat id,
 * sandboxes by state. Needs the API key in protected mode. Load it first in the manifest: its HTTP hooks
 * then cover every route; it attaches to the `mcp` registry and the `sandbox` service, when those are
 * loaded, once all plugins are.
 */
const metrics: FastifyPluginAsync<MetricsOptions> = async (fastify, raw) => {
  const opts = parseOptions(MetricsOptions, raw, 'metrics')
  const log = fastify.log.child({ plugin: 'metrics' })
  const c = createCollectors(opts.prefix, opts.defaultMetrics)
  c.sandboxCapacity.set(opts.maxRunning)
  observeHttp(fastify, c)

  // onReady hooks run in registration order, so this one runs before mcp-transport seals its registry.
  fastify.addHook('onReady', async () => {
    if (fastify.hasDecorator('mcp')) {
      fastify.mcp.onToolCall(event => {
        c.toolCalls.inc({ tool: event.tool, outcome: event.outcome })
        c.toolSeconds.observe({ tool: event.tool }, event.durationMs / 1000)
      })
      fastify.mcp.onChatlessRequest(event => { c.withoutChatId.inc({ method: event.method, mode: event.mode }) })
    }
    if (fastify.hasDecorator('sandbox')) observeSandboxes(fastify.sandbox, c, log)
  })

  fastify.get(opts.path, {
    schema: {
      summary: 'Prometheus metrics',
      description: 'Text exposition format 0.0.4. Needs `Authorization: Bearer <MCP_API_KEY>` in protected mode.',
      tags: ['operations'],
      produces: ['text/plain']
    }
  }, async (request, reply) => {
    await requireKey(request, reply)
    const body = await c.registry.metrics()
    return await reply.header('Content-Type', c.registry.contentType).header('Cache-Control', 'no-store').send(body)
  })
}

export default fp(metrics, { name: 'metrics', fastify: '5.x', decorators: { fastify: ['auth'] } })
