import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import type {} from '../sandbox/types.js'
import type { SubAgentService } from '../sub-agent/types.js'
import { createCliControl } from './cli.js'
import { TerminalOptions } from './schemas.js'
import { createTerminalService } from './service.js'
import routes from './routes.js'
import socketRoutes from './socket.js'

export type { TerminalOptions } from './schemas.js'

/**
 * The web terminal (docs/contract.md#terminal, docs/contract.md#websocket-origin-and-auth): the human shares the chat's shell live. Each viewer's
 * WebSocket (ttyd framing) drives its own TTY exec of `tmux -u new-session -A -s main` as the
 * sandbox user, so all viewers share session `main`, which survives them. Control routes start,
 * stop and inspect it. Decorates `fastify.terminal`. The active CLI's sessions and processes come
 * from `fastify.subAgent` when the sub-agent plugin is loaded (optional: empty lists without it).
 */
const terminal: FastifyPluginAsync<TerminalOptions> = async (fastify, raw) => {
  const opts = parseOptions(TerminalOptions, raw, 'terminal')
  const log = fastify.log.child({ plugin: 'terminal' })
  const service = createTerminalService(fastify.sandbox, fastify.chatStorage, log, opts)
  fastify.decorate('terminal', service)
  // Looked up per request, so the manifest's order does not matter; missing, the routes say so (cli.ts).
  const subAgent = (): SubAgentService | undefined => fastify.hasDecorator('subAgent') ? fastify.subAgent : undefined
  fastify.addHook('onReady', async () => {
    if (subAgent() === undefined) log.info('the sub-agent plugin is not loaded: terminal sessions and processes are empty lists, kill answers 404 no_sub_agent')
  })
  // Close in preClose: server.close() waits for upgraded sockets (core's preClose, core/app.ts, has told
  // every socket 1001 and cut the ones whose peer did not answer). Each viewer's tmux client is detached on
  // the way out (Docker would keep it running), so the wait is bounded.
  fastify.addHook('preClose', async () => {
    let timer: NodeJS.Timeout | undefined
    await Promise.race([
      service.closeAll('server shutting down'),
      new Promise(resolve => { timer = setTimeout(resolve, 3000).unref() })
    ])
    clearTimeout(timer)
  })
  await fastify.register(routes, { service, cli: createCliControl(subAgent, fastify.sandbox, { killGraceMs: opts.killGraceMs }, log) })
  await fastify.register(socketRoutes, {
    service,
    maxViewers: opts.maxViewers,
    isRunning: async chatId => (await fastify.sandbox.status(chatId)).state === 'running'
  })
}

export default fp(terminal, {
  name: 'terminal',
  fastify: '5.x',
  dependencies: ['sandbox', 'chat-storage'],
  decorators: { fastify: ['auth', 'origins', 'sandbox', 'websocketServer', 'chatStorage'] }
})
