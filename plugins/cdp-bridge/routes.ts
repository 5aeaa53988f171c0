import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import { chatAccess, chatOf, chatRoutes, linkToken } from '../../core/route-kit.js'
import { ChatQuery, NoBody } from '../../core/route-schema.js'
import { ChatParams, ReleaseReply, SocketParams, StatusReply, TargetsReply, VersionReply } from './schemas.js'
import { publicSocketUrl } from './targets.js'
import type { HandoffService } from './handoff.js'

export interface CdpRoutesOptions {
  publicBaseUrl: string
  handoffs: HandoffService
}

interface ChatRoute { Params: { chat: string } }
interface SocketRoute { Params: SocketParams }

const NO_STORE = 'no-cache, no-store'

/** The browser routes of docs/contract.md#browser: every one needs a control token or the API key. */
const routes: FastifyPluginAsync<CdpRoutesOptions> = async (fastify, opts) => {
  const { cdp } = fastify
  chatRoutes(fastify, ['/browser/:chat/status', '/browser/:chat/json', '/browser/:chat/json/list', '/browser/:chat/json/version', '/browser/:chat/handoff/release'])

  /**
   * Chat id (400), then credentials (401/403), before anything touches the sandbox
   * (docs/contract.md#general-http-rules); after the schema checked the inputs (preHandler) on the
   * HTTP routes, before it on the socket.
   */
  const authorize = chatAccess('c')

  fastify.get<ChatRoute>('/browser/:chat/status', {
    schema: { summary: 'Whether the sandbox\'s browser runs, and its pages', tags: ['browser'], params: ChatParams, querystring: ChatQuery, response: { 200: StatusReply } },
    preHandler: authorize
  }, async (request, reply) => {
    const chatId = chatOf(request)
    const handoff = opts.handoffs.current(chatId)
    return await reply.header('Cache-Control', NO_STORE).send({
      ...await cdp.status(chatId),
      ...(handoff !== undefined && { handoff: { why: handoff.why, since: new Date(handoff.since).toISOString() } })
    })
  })

  fastify.post<ChatRoute>('/browser/:chat/handoff/release', {
    bodyLimit: 1024,
    schema: { summary: 'The human hands the browser back to the assistant (ends the chat\'s open `browser handoff`)', tags: ['browser'], params: ChatParams, querystring: ChatQuery, body: NoBody, response: { 200: ReleaseReply } },
    preHandler: authorize
  }, async (request, reply) => {
    return await reply.header('Cache-Control', NO_STORE).send({ released: opts.handoffs.release(chatOf(request)) })
  })

  const targetList = async (request: FastifyRequest<ChatRoute>, reply: FastifyReply): Promise<FastifyReply> => {
    const chatId = chatOf(request)
    const list = await cdp.targets(chatId)
    const body = list.map(t => ({ ...t, webSocketDebuggerUrl: publicSocketUrl(opts.publicBaseUrl, chatId, t.id, linkToken(request)) }))
    return await reply.header('Cache-Control', NO_STORE).send(body)
  }
  // DevTools clients ask for either name of the list.
  for (const path of ['/browser/:chat/json', '/browser/:chat/json/list']) {
    fastify.get<ChatRoute>(path, { schema: { summary: 'CDP targets of the sandbox\'s browser, socket URLs rewritten to this server', tags: ['browser'], params: ChatParams, querystring: ChatQuery, response: { 200: TargetsReply } }, preHandler: authorize }, targetList)
  }

  fastify.get<ChatRoute>('/browser/:chat/json/version', {
    schema: { summary: 'The browser\'s CDP version object (without its socket URL)', tags: ['browser'], params: ChatParams, querystring: ChatQuery, response: { 200: VersionReply } },
    preHandler: authorize
  }, async (request, reply) => {
    return await reply.header('Cache-Control', NO_STORE).send(await cdp.version(chatOf(request)))
  })

  // Slots reserved before the upgrade, by handshake request, for the handler to take over.
  const reserved = new WeakMap<FastifyRequest, () => void>()

  fastify.get<SocketRoute>('/browser/:chat/devtools/page/:id', {
    websocket: true,
    schema: { summary: 'WebSocket: CDP relay to one page of the sandbox\'s browser', tags: ['browser'], params: SocketParams, querystring: ChatQuery },
    // Everything that can refuse the handshake runs before the upgrade, so refusals are plain HTTP
    // answers (docs/contract.md#websocket-origin-and-auth): Origin 403 (the chatRoutes hook, the terminal socket's rule), chat id
    // 400, credentials 401/403, then (after the schema checked the target id, 400) sandbox 404 and
    // the viewer caps 429.
    preValidation: authorize,
    preHandler: async request => {
      const release = await cdp.reserve(chatOf(request))
      reserved.set(request, release)
      // Freed however the connection ends: a failed upgrade never reaches the handler.
      request.raw.socket.once('close', release)
    }
  }, (socket, request) => {
    const chatId = chatOf(request)
    const release = reserved.get(request) ?? (() => {})
    reserved.delete(request)
    cdp.relay(chatId, request.params.id, socket, release)
  })
}

export default routes
