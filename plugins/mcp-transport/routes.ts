import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { classifyInboundRequest, CLIENT_CAPABILITIES_META_KEY, isInitializeRequest, type JSONRPCRequest } from '@modelcontextprotocol/server'
import { errorBody } from '../../core/errors.js'
import { readUser } from '../../core/identity.js'
import { mcpChat } from '../../core/route-kit.js'
import { MCP_NOT_ACCEPTABLE, MCP_RESUMPTION_NOT_SUPPORTED } from './errors.js'
import { Exchange } from './exchange.js'
import { registerGuard } from './guard.js'
import { keepAlive, openStream, writeEvent } from './sse.js'
import { acceptsPriming, APPS_EXTENSION, declaredApps, declaredExtensions, declaresUrlElicitation, elicitsUrl, issueSessionId } from './session.js'
import type { ClientRequests } from './client-requests.js'
import type { UrlElicitor } from './tool-call.js'
import { createRequestServer, type ServerDeps } from './server-factory.js'
import type { ModernLeg } from './modern.js'
import { HAND_CHECKED } from '../../core/route-schema.js'
import { McpHeaders, RpcBody, SUPPORTED_PROTOCOL_VERSIONS, type McpTransportOptions } from './schemas.js'
import type { McpRequestContext } from './types.js'
import type { RegistryInternals } from './registry.js'

type Rpc = Record<string, unknown>

/** The MCP methods a metric label may name (a bounded set: anything else is `other`). */
export const MCP_METHODS = new Set(['initialize', 'ping', 'tools/list', 'tools/call', 'resources/list', 'resources/read', 'resources/templates/list', 'prompts/list', 'prompts/get',
  'server/discover', 'subscriptions/listen'])
const rpcError = (code: number, message: string, id: unknown = null): Rpc => ({ jsonrpc: '2.0', id, error: { code, message } })

export interface RouteDeps extends ServerDeps { registry: RegistryInternals, opts: Required<McpTransportOptions>, modern: ModernLeg, clientRequests: ClientRequests }

const ACTIONS = new Set(['accept', 'decline', 'cancel'])

function isNotification (message: unknown, method: string): boolean {
  return message !== null && typeof message === 'object' && !Array.isArray(message) && (message as Rpc).method === method && (message as Rpc).id === undefined
}

/** A header the classifier reads, when it was sent once (a repeated one is left out and judged missing). */
function optionalHeader<K extends string> (key: K, value: string | string[] | undefined): Partial<Record<K, string>> {
  return typeof value === 'string' ? { [key]: value } as Partial<Record<K, string>> : {}
}

export default async function mcpRoutes (fastify: FastifyInstance, { deps }: { deps: RouteDeps }): Promise<void> {
  const { registry, runner, opts, modern, clientRequests } = deps
  /** `capabilities`: the 2026-07-28 request's declared client capabilities; 2025-era requests carry them in the session id. */
  const context = (request: FastifyRequest, method: string, capabilities?: unknown): McpRequestContext => {
    const user = readUser(request.headers, request.principal)
    if (user.emailRejected) request.log.warn('ignoring an invalid X-User-Email header')
    const resolution = mcpChat(request, opts.singleUserMode)
    const chatless = resolution.kind === 'missing' ? 'strict' : resolution.kind === 'chat' && resolution.lenientNote ? 'lenient' : undefined
    if (chatless !== undefined) registry.chatlessRequest({ method: MCP_METHODS.has(method) ? method : 'other', mode: chatless }, request.log)
    const known = registry.clientExtensionIds()
    const clientExtensions = capabilities !== undefined
      ? declaredExtensions(capabilities, known)
      : new Set(known.has(APPS_EXTENSION) && declaredApps(request.headers) ? [APPS_EXTENSION] : [])
    return { requestId: request.id, resolution, user, headers: request.headers, log: request.log, clientExtensions }
  }
  // Raw JSON bodies: we answer unparseable JSON with a JSON-RPC -32700 ourselves; other types get 415.
  fastify.removeAllContentTypeParsers()
  fastify.addContentTypeParser(/^application\/([a-z.+-]+\+)?json(\s*;.*)?$/i, { parseAs: 'buffer', bodyLimit: opts.maxBodyBytes },
    (_request, body, done) => { done(null, body) })

  // Origin, CORS and auth run before any body parsing (docs/contract.md#authentication-and-origin).
  const preflight = registerGuard(fastify, opts)

  const paths = opts.path.endsWith('/') ? [opts.path.slice(0, -1), opts.path] : [opts.path, `${opts.path}/`]
  // The body stays raw (parse errors are JSON-RPC answers, not AJV's): documented, checked by hand.
  const post = { ...HAND_CHECKED, schema: { tags: ['mcp'], summary: 'One JSON-RPC 2.0 message (MCP Streamable HTTP, stateless)', headers: McpHeaders, body: RpcBody } }
  for (const url of paths) {
    fastify.post(url, post, async (request, reply) => await handlePost(request, reply))
    fastify.get(url, { exposeHeadRoute: false, schema: { tags: ['mcp'], summary: 'The chat\'s notification stream (SSE); 405 to a resumption (Last-Event-ID)' } }, async (request, reply) => await handleGet(request, reply))
    fastify.delete(url, { schema: { tags: ['mcp'], summary: 'Ends nothing (no sessions): 204' } }, async (_request, reply) => await reply.code(204).send())
    fastify.options(url, preflight)
  }

  async function handlePost (request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    let message: unknown
    try {
      message = JSON.parse((request.body as Buffer | undefined)?.toString('utf8') ?? '')
    } catch {
      return await reply.code(400).send(rpcError(-32700, 'Parse error: the body is not valid JSON'))
    }
    if (isNotification(message, 'notifications/cancelled')) cancel(request, message as Rpc)
    // The SDK decides the era (docs/contract.md#protocol-revisions): a request carrying the 2026-07-28
    // envelope (or a modern MCP-Protocol-Version header) goes to its handler, including the ones it
    // rejects; 2025-era traffic stays on this leg.
    const era = classifyInboundRequest({
      httpMethod: 'POST',
      body: message,
      ...optionalHeader('protocolVersionHeader', request.headers['mcp-protocol-version']),
      ...optionalHeader('mcpMethodHeader', request.headers['mcp-method']),
      ...optionalHeader('mcpNameHeader', request.headers['mcp-name'])
    })
    if (era.kind !== 'legacy') {
      const method = typeof (message as Rpc).method === 'string' ? (message as Rpc).method as string : 'other'
      // The SDK validates the envelope; a malformed one is refused there, and reads as no capabilities here.
      const meta = ((message as Rpc).params as Rpc | undefined)?._meta as Rpc | undefined
      return await modern.serve(request, reply, message, context(request, method, meta?.[CLIENT_CAPABILITIES_META_KEY] ?? {}))
    }
    if (Array.isArray(message)) return await reply.code(400).send(rpcError(-32600, 'Invalid Request: batches are not supported'))
    if (message === null || typeof message !== 'object' || (message as Rpc).jsonrpc !== '2.0') {
      return await reply.code(400).send(rpcError(-32600, 'Invalid Request: expected a JSON-RPC 2.0 object'))
    }
    const version = request.headers['mcp-protocol-version']
    if (typeof version === 'string' && version.trim() !== '' && !SUPPORTED_PROTOCOL_VERSIONS.includes(version.trim())) {
      return await reply.code(400).send(rpcError(-32600, `Bad Request: unsupported MCP-Protocol-Version ${version}; supported: ${SUPPORTED_PROTOCOL_VERSIONS.join(', ')}`, (message as Rpc).id ?? null))
    }
    const msg = message as Rpc
    if (typeof msg.method !== 'string' || msg.id === undefined || msg.id === null) {
      // Notifications and responses: 202, nothing else (docs/contract.md#methods-on-mcp). Cancellation was acted
      // on above; a response to one of our requests to the client settles it (docs/contract.md#url-elicitation).
      const resolution = mcpChat(request, opts.singleUserMode)
      if (msg.method === undefined && resolution.kind === 'chat') clientRequests.answer(resolution.chatId, msg)
      return await reply.code(202).send()
    }
    return await handleRequest(request, reply, msg as unknown as JSONRPCRequest)
  }

  function cancel (request: FastifyRequest, msg: Rpc): void {
    const params = msg.params as { requestId?: unknown } | undefined
    const id = params?.requestId
    const resolution = mcpChat(request, opts.singleUserMode)
    if (resolution.kind === 'chat' && (typeof id === 'string' || typeof id === 'number')) runner.cancel(resolution.chatId, id)
  }

  async function handleRequest (request: FastifyRequest, reply: FastifyReply, msg: JSONRPCRequest): Promise<unknown> {
    const accept = (request.headers.accept ?? '*/*').toLowerCase()
    const acceptsSse = accept.includes('text/event-stream')
    if (!acceptsSse && !/application\/json|\*\/\*|application\/\*/.test(accept)) {
      return await reply.code(406).send(rpcError(-32600, 'Not Acceptable: accept application/json or text/event-stream', msg.id))
    }
    // Requests the SDK server would refuse for want of a declared capability are answered here (docs/contract.md#initialize-result).
    if (msg.method === 'prompts/list') return await reply.send({ jsonrpc: '2.0', id: msg.id, result: { prompts: [] } })
    if (msg.method === 'prompts/get') return await reply.send(rpcError(-32602, 'Prompt not found', msg.id))
    if (msg.method === 'tools/call') {
      const params = msg.params as Rpc | undefined
      if (params === undefined || typeof params.name !== 'string' ||
        (params.arguments !== undefined && (params.arguments === null || typeof params.arguments !== 'object' || Array.isArray(params.arguments)))) {
        return await reply.send(rpcError(-32602, 'Invalid params: tools/call needs {"name": string, "arguments": object}', msg.id))
      }
    }

    const ctx = context(request, msg.method)
    const instructions = isInitializeRequest(msg) ? await registry.instructions(ctx) : undefined
    const useSse = msg.method === 'tools/call' && acceptsSse
    const disconnect = new AbortController()
    // A tool call streamed to a client that declared URL-mode elicitation may ask it to open a URL (docs/contract.md#url-elicitation).
    const chatId = ctx.resolution.kind === 'chat' ? ctx.resolution.chatId : undefined
    const elicitUrl: UrlElicitor | undefined = useSse && chatId !== undefined && elicitsUrl(request.headers)
      ? async (params, { timeoutMs, signal }) => {
        const result = await clientRequests.ask(chatId, m => { writeEvent(reply, m) }, 'elicitation/create', { mode: 'url', ...params }, { timeoutMs, signal })
        const action = typeof result.action === 'string' && ACTIONS.has(result.action) ? result.action as 'accept' | 'decline' | 'cancel' : 'cancel'
        return action
      }
      : undefined
    const server = createRequestServer(deps, ctx, { era: 'legacy', instructions, onCancelled: () => { exchange.dropResponse = true }, ...(elicitUrl !== undefined && { elicitUrl }) })
    const exchange = new Exchange(msg.id, notification => { if (useSse) writeEvent(reply, notification) })
    await server.connect(exchange)

    if (!useSse) {
      const response = await exchange.deliver(msg, {})
      await server.close()
      if (response === undefined) return await reply.code(204).send()
      // Stateless, yet session-friendly (docs/contract.md#transport): a random id, stored nowhere, never required.
      if (isInitializeRequest(msg) && 'result' in response) {
        const apps = registry.clientExtensionIds().has(APPS_EXTENSION) && declaredExtensions((msg.params as Rpc | undefined)?.capabilities, registry.clientExtensionIds()).has(APPS_EXTENSION)
        reply.header('Mcp-Session-Id', issueSessionId(String(response.result.protocolVersion), declaresUrlElicitation(msg.params), apps))
      }
      return await reply.type('application/json').send(response)
    }

    openStream(reply, { retryMs: opts.sseRetryMs, primed: acceptsPriming(request.headers), kind: 'post' })
    const stopKeepAlive = keepAlive(reply, opts.keepAliveMs)
    reply.raw.on('close', () => { if (!reply.raw.writableFinished) disconnect.abort() })
    disconnect.signal.addEventListener('abort', () => {
      void exchange.onmessage?.({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: msg.id, reason: 'client disconnected' } })
      exchange.abandon()
    }, { once: true })
    try {
      const response = await exchange.deliver(msg, {})
      if (response !== undefined) writeEvent(reply, response)
    } finally {
      stopKeepAlive()
      reply.raw.end()
      await server.close()
    }
    return reply
  }

  async function handleGet (request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    if (request.headers['last-event-id'] !== undefined) {
      // A client resuming an interrupted POST stream (its priming id). We keep no events to replay and
      // the interrupted call was cancelled; 405 tells SDK clients to stop instead of waiting on a
      // notification stream that will never carry that response.
      return await reply.code(405).header('Allow', 'GET, POST, DELETE').send(errorBody(new MCP_RESUMPTION_NOT_SUPPORTED()))
    }
    if (!(request.headers.accept ?? '').toLowerCase().includes('text/event-stream')) {
      return await reply.code(406).send(errorBody(new MCP_NOT_ACCEPTABLE()))
    }
    const resolution = mcpChat(request, opts.singleUserMode)
    openStream(reply, { retryMs: opts.sseRetryMs, primed: acceptsPriming(request.headers), kind: 'get' })
    const unsubscribe = resolution.kind === 'chat'
      ? registry.subscribe(resolution.chatId, n => writeEvent(reply, { jsonrpc: '2.0', ...n }))
      : () => {}
    const stopKeepAlive = keepAlive(reply, opts.keepAliveMs)
    const maxAge = setTimeout(() => reply.raw.end(), opts.getStreamMaxMs)
    const cleanup = (): void => { stopKeepAlive(); clearTimeout(maxAge); unsubscribe() }
    reply.raw.on('close', cleanup)
    openStreams.add(reply)
    reply.raw.on('close', () => openStreams.delete(reply))
    return reply
  }

  // Open GET streams would keep close() waiting; end them first (docs/conventions.md#lifecycle).
  const openStreams = new Set<FastifyReply>()
  fastify.addHook('preClose', async () => { for (const r of openStreams) r.raw.end() })
}
