import type { FastifyPluginAsync } from 'fastify'
import { chatAccess, chatOf, chatRoutes } from '../../core/route-kit.js'
import { TERMINAL_BAD_SUBPROTOCOL, TERMINAL_SANDBOX_NOT_RUNNING, TERMINAL_TOO_MANY_VIEWERS, TERMINAL_UPGRADE_REQUIRED } from './errors.js'
import type { ChatParams } from './schemas.js'
import type { TerminalService } from './types.js'
import { ChatParams as ChatParamsSchema, ChatQuery, HAND_CHECKED } from '../../core/route-schema.js'

export interface TerminalSocketOptions {
  service: TerminalService
  maxViewers: number
  /** Never starts anything (SandboxService.status). */
  isRunning: (chatId: string) => Promise<boolean>
}

/** `tty` must be among the offered subprotocols when the client offers any (ttyd's client does). */
function offersTty (header: string | undefined): boolean {
  if (header === undefined) return true
  return header.split(',').some(p => p.trim() === 'tty')
}

/**
 * WS /terminal/{chat}/ws (docs/contract.md#terminal, docs/contract.md#websocket-origin-and-auth). Everything is decided before the upgrade, in
 * onRequest, so a refusal is a plain HTTP answer: 403 Origin (core's chat-route rule, the same as the
 * browser socket's), 400 bad chat id or subprotocol, 401/403 credentials, 404 sandbox not running,
 * 429 viewer cap. A plain GET gets 426.
 */
const socketRoutes: FastifyPluginAsync<TerminalSocketOptions> = async (fastify, opts) => {
  const { service } = opts
  chatRoutes(fastify)
  const access = chatAccess('c')

  fastify.route<{ Params: ChatParams }>({
    method: 'GET',
    url: '/terminal/:chat/ws',
    // Checked by hand in onRequest, refusals as plain HTTP answers before the upgrade: HAND_CHECKED.
    ...HAND_CHECKED,
    schema: { summary: 'WebSocket: a TTY on tmux session main in the sandbox (ttyd framing, subprotocol tty)', tags: ['terminal'], params: ChatParamsSchema, querystring: ChatQuery },
    onRequest: async (request, reply) => {
      await access(request, reply)
      const chatId = chatOf(request)
      if (!request.ws) return
      if (!offersTty(request.headers['sec-websocket-protocol'])) throw new TERMINAL_BAD_SUBPROTOCOL()
      if (!await opts.isRunning(chatId)) throw new TERMINAL_SANDBOX_NOT_RUNNING()
      if (service.viewers(chatId) >= opts.maxViewers) throw new TERMINAL_TOO_MANY_VIEWERS(opts.maxViewers)
    },
    handler: async () => { throw new TERMINAL_UPGRADE_REQUIRED() },
    wsHandler: (socket, request) => {
      service.attach(chatOf(request), socket, request.log)
    }
  })
}

export default socketRoutes
