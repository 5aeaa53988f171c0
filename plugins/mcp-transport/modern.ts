import { AsyncLocalStorage } from 'node:async_hooks'
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify'
import { createMcpHandler, type McpHttpHandler, type ServerEvent, type ServerEventBus } from '@modelcontextprotocol/server'
import type { RegistryInternals } from './registry.js'
import { createRequestServer, type ServerDeps } from './server-factory.js'
import type { McpTransportOptions } from './schemas.js'
import type { ChatNotification, McpRequestContext } from './types.js'

/** The change notifications a `subscriptions/listen` stream may carry, by the bus event that carries them. */
const EVENT_OF: Record<string, ServerEvent['kind'] | undefined> = {
  'notifications/tools/list_changed': 'tools_list_changed',
  'notifications/prompts/list_changed': 'prompts_list_changed',
  'notifications/resources/list_changed': 'resources_list_changed'
}

/** What the factory needs to know about the HTTP request it builds a server for. */
interface Pending { ctx: McpRequestContext, method: string | undefined, drop: () => void }

/**
 * The SDK's event bus, scoped to chats: a `subscriptions/listen` stream subscribes while its request is
 * served, so the chat of that request (carried by `scope`) is the one whose notifications it gets —
 * the same per-chat sinks the 2025-era GET streams use (registry.notifyChat). Nothing is published
 * to every chat: `publish` is not used by this server and delivers nowhere.
 */
function chatBus (registry: RegistryInternals, scope: AsyncLocalStorage<string | undefined>): ServerEventBus {
  return {
    publish () {},
    subscribe (listener) {
      const chatId = scope.getStore()
      if (chatId === undefined) return () => {}
      return registry.subscribe(chatId, (notification: ChatNotification) => {
        const kind = EVENT_OF[notification.method]
        if (kind !== undefined && kind !== 'resource_updated') listener({ kind, ...(notification.params !== undefined && { params: notification.params }) })
      })
    }
  }
}

export interface ModernLeg {
  /** Serves one 2026-07-28 POST (already parsed and classified modern) through the SDK's handler. */
  serve (request: FastifyRequest, reply: FastifyReply, message: unknown, ctx: McpRequestContext): Promise<unknown>
  /**
   * After the shutdown drain: waits up to `flushMs` for exchanges still writing their answer (a drained
   * call's result leaves the SDK a few ticks after the tool returns), then ends open
   * `subscriptions/listen` streams and whatever is still in flight.
   */
  close (flushMs: number): Promise<void>
}

/**
 * The 2026-07-28 leg of /mcp: the SDK's `createMcpHandler` (strict modern: 2025-era traffic never
 * reaches it, routes.ts keeps serving that) does the envelope, `server/discover`, the header checks
 * (`Mcp-Method`, `Mcp-Name`, `MCP-Protocol-Version` against the body), cache fields and
 * `subscriptions/listen`; our per-request server (server-factory.ts) answers the methods. Two
 * handlers differ only in response shape: a tools/call that accepts SSE is always streamed, so
 * keep-alive comments flow while a long command runs; everything else is JSON unless it streams.
 */
export function createModernLeg (deps: ServerDeps & { registry: RegistryInternals, opts: Required<McpTransportOptions>, log: FastifyBaseLogger }): ModernLeg {
  const { registry, opts, log } = deps
  const pending = new WeakMap<Request, Pending>()
  const scope = new AsyncLocalStorage<string | undefined>()
  const bus = chatBus(registry, scope)
  const factory = async ({ era, requestInfo }: { era: 'legacy' | 'modern', requestInfo?: Request }): Promise<ReturnType<typeof createRequestServer>> => {
    const entry = requestInfo === undefined ? undefined : pending.get(requestInfo)
    // Only this module calls the handlers, always with a request it registered.
    if (entry === undefined) throw new Error('MCP request served without its context')
    // server/discover carries the instructions on this revision; they are per chat, so rendered only when asked.
    const instructions = entry.method === 'server/discover' ? await registry.instructions(entry.ctx) : undefined
    // A cancelled call sends no result: ending the exchange is how this transport drops it.
    return createRequestServer(deps, entry.ctx, { era, instructions, onCancelled: entry.drop })
  }
  // Per chat (chatless ones share ''), so one chat cannot take the handler-wide maxSubscriptions.
  const listening = new Map<string, number>()
  /** Requests other than listen streams whose response has not been sent completely. */
  const answering = new Set<Promise<void>>()
  const common = {
    legacy: 'reject' as const,
    // Refused requests (bad envelope, header mismatch) are the client's; a client may send many.
    onerror: (err: Error) => { log.debug({ err }, 'an MCP 2026-07-28 request was refused or failed') },
    bus,
    keepAliveMs: opts.keepAliveMs,
    maxRequestBodySize: opts.maxBodyBytes
  }
  const streamed: McpHttpHandler = createMcpHandler(factory, { ...common, responseMode: 'sse' })
  const auto: McpHttpHandler = createMcpHandler(factory, { ...common, responseMode: 'auto' })

  return {
    async serve (request, reply, message, ctx) {
      const method = typeof (message as { method?: unknown }).method === 'string' ? (message as { method: string }).method : undefined
      const chat = chatOf(ctx) ?? ''
      const listen = method === 'subscriptions/listen'
      if (listen && (listening.get(chat) ?? 0) >= opts.maxListenStreamsPerChat) {
        // The SDK's own answer to its server-wide limit: in band, before any acknowledgement.
        return await reply.send({ jsonrpc: '2.0', id: (message as { id?: unknown }).id ?? null, error: { code: -32603, message: 'Subscription limit reached for this chat' } })
      }
      const disconnect = new AbortController()
      reply.raw.on('close', () => { if (!reply.raw.writableFinished) disconnect.abort() })
      if (!listen) {
        const answered = new Promise<void>(resolve => { reply.raw.once('close', resolve) })
        answering.add(answered)
        void answered.then(() => answering.delete(answered))
      }
      const web = new Request(`http://mcp.invalid${request.url}`, { method: 'POST', headers: webHeaders(request), signal: disconnect.signal })
      pending.set(web, { ctx, method, drop: () => { disconnect.abort() } })
      const acceptsSse = (request.headers.accept ?? '').toLowerCase().includes('text/event-stream')
      const handler = method === 'tools/call' && acceptsSse ? streamed : auto
      const response = await scope.run(chatOf(ctx), async () => await handler.fetch(web, { parsedBody: message }))
      if (listen && response.headers.get('content-type') === 'text/event-stream') {
        listening.set(chat, (listening.get(chat) ?? 0) + 1)
        reply.raw.once('close', () => {
          const left = (listening.get(chat) ?? 1) - 1
          if (left === 0) listening.delete(chat)
          else listening.set(chat, left)
        })
      }
      reply.code(response.status)
      for (const [name, value] of response.headers) reply.header(name, value)
      return await reply.send(response.body ?? undefined)
    },
    async close (flushMs) {
      let timer: NodeJS.Timeout | undefined
      await Promise.race([Promise.allSettled([...answering]), new Promise<void>(resolve => { timer = setTimeout(resolve, flushMs) })])
      clearTimeout(timer)
      await Promise.all([streamed.close(), auto.close()])
    }
  }
}

function chatOf (ctx: McpRequestContext): string | undefined {
  return ctx.resolution.kind === 'chat' ? ctx.resolution.chatId : undefined
}

/** The request's headers as web Headers (repeated headers joined as HTTP allows). */
function webHeaders (request: FastifyRequest): Headers {
  const headers = new Headers()
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined) continue
    headers.set(name, Array.isArray(value) ? value.join(', ') : value)
  }
  return headers
}
