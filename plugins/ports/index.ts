import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import { PortsOptions } from './schemas.js'
import { createPortsService, LISTENING_MAX } from './service.js'
import { createAppOrigins, parseAppsDomain } from './origin.js'
import routes from './routes.js'
import type {} from '../workspace-tools/types.js'

/**
 * App preview URLs (docs/features.md#app-preview-urls): `/apps/<chat>/<port>/…` relays HTTP and
 * WebSocket requests to the app on <port> in the chat's sandbox: straight to the sandbox's address when the app
 * listens beyond loopback and the engine vouches for the address (direct.ts), else to 127.0.0.1 (or ::1) inside it
 * through the in-sandbox agent's connections, or exec relays where it cannot serve (no published port, no network
 * change), with the chat's control token or the API key. Decorates `ports`; adds
 * the new listening ports to bash_tool results when workspace-tools is loaded. Never starts a sandbox.
 */
const ports: FastifyPluginAsync<PortsOptions> = async (fastify, raw) => {
  const opts = parseOptions(PortsOptions, raw, 'ports')
  const log = fastify.log.child({ plugin: 'ports' })
  const domain = parseAppsDomain(opts.appsDomain, opts.publicBaseUrl)
  const appOrigins = domain === undefined ? undefined : createAppOrigins(domain, opts.publicBaseUrl)
  if (appOrigins !== undefined) {
    // Before routing: a request for <key>-<port>.<domain> goes to the app route (origin.ts).
    fastify.addUrlRewrite(appOrigins.rewrite)
    fastify.sandbox.onEnsure(async box => { appOrigins.remember(box.chatId) })
  }
  const runtime = createPortsService({ sandbox: fastify.sandbox, links: fastify.links, log, appOrigins }, {
    maxConnectionsPerChat: opts.maxConnectionsPerChat,
    freeSocketMs: opts.freeSocketMs,
    hiddenPorts: opts.hiddenPorts,
    listTimeoutMs: opts.listTimeoutMs,
    connectTimeoutMs: opts.headersTimeoutS * 1000
  })
  fastify.decorate('ports', runtime.service)
  // A stop closes the chat's app connections; a pause too (its pooled relays are frozen), and the next
  // request opens a new one, which wakes the sandbox with its processes and listening ports as they were.
  fastify.sandbox.onStop?.((chatId, reason) => { runtime.sandboxStopped(chatId, reason === 'paused') })
  if (fastify.hasDecorator('workspaceTools')) {
    // The listening sockets come with the command's exit where the engine says them (no question to the sandbox after it).
    fastify.workspaceTools.addResultNote(async (chatId, facts) => {
      const fresh = await runtime.newlyListening(chatId, facts.listening)
      if (fresh.length === 0) return undefined
      return `[New listening ports, open in the user's browser: ${fresh.map(port => `${port}: ${runtime.service.appUrl(chatId, port)}`).join(', ')}]`
    }, { listening: LISTENING_MAX })
  }
  // preClose: server.close() waits for upgraded sockets and kept-alive streams.
  fastify.addHook('preClose', runtime.close)
  fastify.addHook('onClose', runtime.close)
  await fastify.register(routes, {
    runtime,
    publicBaseUrl: opts.publicBaseUrl,
    hiddenPorts: new Set(opts.hiddenPorts),
    ...(appOrigins === undefined ? {} : { appOrigins }),
    limits: {
      maxRequestBytes: opts.maxRequestBytes,
      maxResponseBytes: opts.maxResponseBytes,
      headersTimeoutMs: opts.headersTimeoutS * 1000,
      idleTimeoutMs: opts.idleTimeoutS * 1000,
      handshakeTimeoutMs: opts.headersTimeoutS * 1000,
      maxHeaderBytes: opts.maxHeaderBytes,
      maxMessageBytes: opts.maxMessageBytes,
      highWaterBytes: opts.highWaterBytes
    }
  })
}

export default fp(ports, {
  name: 'ports',
  fastify: '5.x',
  dependencies: ['sandbox', 'capabilities'],
  decorators: { fastify: ['sandbox', 'links', 'auth', 'origins', 'websocketServer', 'addUrlRewrite'] }
})
