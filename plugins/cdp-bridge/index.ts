import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import { CdpBridgeOptions } from './schemas.js'
import { createCdpService } from './service.js'
import { createHandoffService } from './handoff.js'
import routes from './routes.js'
import type {} from '../workspace-tools/types.js'

/**
 * The live browser bridge (docs/contract.md#browser, docs/contract.md#websocket-origin-and-auth): status, target list and version of the browser in
 * a chat's sandbox, and a CDP WebSocket relay to its pages, all through exec relays into the sandbox
 * (no published ports, no network changes). Decorates `cdp`. Never creates or starts a sandbox.
 */
const cdpBridge: FastifyPluginAsync<CdpBridgeOptions> = async (fastify, raw) => {
  const opts = parseOptions(CdpBridgeOptions, raw, 'cdp-bridge')
  const log = fastify.log.child({ plugin: 'cdp-bridge' })
  const { service, sandboxStopped, close } = createCdpService({ sandbox: fastify.sandbox, log }, opts)
  fastify.decorate('cdp', service)
  // `browser handoff "<why>"` (docs/contract.md#browser-handoff): a command request of bash_tool, when it is loaded.
  const handoffs = createHandoffService({
    askTimeoutMs: opts.handoffAskTimeoutMs,
    waitTimeoutMs: opts.handoffWaitTimeoutMs,
    shownMs: opts.handoffShownMs,
    progressMs: opts.handoffProgressMs,
    maxChats: 10_000
  })
  if (fastify.hasDecorator('workspaceTools')) {
    fastify.workspaceTools.addCommandRequest('handoff', async (ctx, why) => await handoffs.request(ctx, why, `${fastify.links.previewUrl(ctx.chatId)}#browser`))
  }
  fastify.addHook('onClose', async () => { handoffs.close() })
  // A stopped or removed sandbox (idle, max age, capacity) closes its viewers with 1001 (docs/contract.md#idle-stop-max-age-and-purge).
  fastify.sandbox.onStop?.(chatId => { sandboxStopped(chatId) })
  // preClose: server.close() waits for upgraded sockets, which would hold the shutdown until the grace timer.
  fastify.addHook('preClose', close)
  fastify.addHook('onClose', close)
  await fastify.register(routes, { publicBaseUrl: opts.publicBaseUrl, handoffs })
}

export default fp(cdpBridge, {
  name: 'cdp-bridge',
  fastify: '5.x',
  dependencies: ['sandbox', 'capabilities'],
  decorators: { fastify: ['sandbox', 'links', 'auth', 'origins', 'websocketServer'] }
})
