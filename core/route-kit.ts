import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { KEY, type ChatScope } from './auth.js'
import { requireChatId } from './chat-id.js'
import type { SingleUserMode } from './config.js'
import { CORE_FORBIDDEN_ORIGIN } from './errors.js'
import { resolveMcpChat, type ChatResolution, type Principal } from './identity.js'

/*
 * Core's route kit: what a route that acts for a chat or needs credentials does before its handler,
 * in one place for HTTP routes, WebSocket routes and /mcp. It owns the two per-request values
 * routes read:
 *
 * - `request.chat`: the chat the request acts for, once decided (a chat route's `:chat` parameter,
 *   validated and normalised; /mcp's X-Chat-Id under SINGLE_USER_MODE), else null;
 * - `request.principal`: what the request's credential proved (core/identity.ts Principal), else null.
 *
 * Both are declared once with `decorateRequest` (null on every request until the kit sets them) and
 * written only here. Everything that refuses runs before the handler, and for a WebSocket route
 * before the upgrade, so a socket is refused exactly as its HTTP sibling is, with the same answer:
 * Origin (403), chat id (400 invalid_chat_id), credentials (401/403/429).
 */

declare module 'fastify' {
  interface FastifyRequest {
    /** The chat this request acts for, once core's route kit decided it (core/route-kit.ts); null otherwise. */
    chat: string | null
    /** What this request's credential proved, once core's route kit checked it (core/route-kit.ts); null otherwise. */
    principal: Principal | null
  }
}

/** Declares `request.chat` and `request.principal`, both null until the kit sets them (core/app.ts, once). */
export function decorateRequestState (app: FastifyInstance): void {
  app.decorateRequest('chat', null)
  app.decorateRequest('principal', null)
}

type Hook = (request: FastifyRequest, reply: FastifyReply) => Promise<void>

/**
 * Requires MCP_API_KEY (or, on a route a BearerVerifier claims, a token it accepts: OAuth on /mcp)
 * and records who presented it. 401/429 as core/auth.ts requireApiKey; open mode passes with none.
 * Usable as a hook or called from a handler that decides first whether the key is needed.
 */
export async function requireKey (request: FastifyRequest, reply: FastifyReply): Promise<void> {
  request.principal = await request.server.auth.requireApiKey(request, reply)
}

/** For a route open to anonymous callers too: records MCP_API_KEY when the request presents it. Never refuses. */
export function noteKey (request: FastifyRequest): void {
  if (request.server.auth.noteApiKey(request)) request.principal = KEY
}

/** Validates and records the route's `:chat` parameter: 400 invalid_chat_id for anything the allowlist refuses. */
export function chatParam (request: FastifyRequest): string {
  const chatId = requireChatId((request.params as { chat: string }).chat)
  request.chat = chatId
  return chatId
}

/** A hook that records `:chat` alone, for routes whose credential is checked otherwise (requireKey). */
export const chatParamHook: Hook = async request => { chatParam(request) }

export interface ChatAccessOptions {
  /** A capability token the route found in its path (the files route's `~token` segment). */
  pathToken?: (request: FastifyRequest) => string | undefined
}

/**
 * The access hook of a chat route: `:chat` (400), then a credential for the chat and `scope` (the API
 * key as a Bearer header, or a capability token of this chat and scope in the header, `?t=` or the
 * path: 401 missing, 403 wrong, 429 throttled), recorded in `request.chat` and `request.principal`.
 * CORS preflights pass untouched: they never carry credentials. Register it where the route's checks
 * belong (onRequest to refuse before a body is read or a socket upgraded; preHandler after a schema).
 */
export function chatAccess (scope: ChatScope, opts: ChatAccessOptions = {}): Hook {
  return async request => {
    if (request.method === 'OPTIONS') return
    grantChat(request, scope, opts.pathToken?.(request))
  }
}

/** chatAccess's check itself, synchronous (it throws the same errors), for a hook of its own on a hot path. */
export function grantChat (request: FastifyRequest, scope: ChatScope, pathToken?: string): void {
  const chatId = chatParam(request)
  const { auth } = request.server
  const token = auth.authorizeChat(request, chatId, scope, pathToken)
  request.principal = token !== undefined ? { kind: 'link', scope, token } : auth.protectedMode ? KEY : null
}

/** `request.chat` of a route whose chat the kit decided; a route that forgot its access hook fails loudly. */
export function chatOf (request: FastifyRequest): string {
  if (request.chat === null) throw new Error(`no chat decided for ${request.routeOptions.url ?? request.url}: the route has no chat access hook`)
  return request.chat
}

/** The capability token a chat route was opened with, if any (not the API key, nothing in open mode). */
export function linkToken (request: FastifyRequest): string | undefined {
  return request.principal?.kind === 'link' ? request.principal.token : undefined
}

/**
 * The chat of an /mcp request under SINGLE_USER_MODE (core/identity.ts resolveMcpChat, with the
 * principal requireKey recorded), recorded in `request.chat` when there is one. Missing and invalid
 * ids are not refused here: /mcp answers them in its tool results, with the hint.
 */
export function mcpChat (request: FastifyRequest, mode: SingleUserMode): ChatResolution {
  const resolution = resolveMcpChat(request.headers, mode, request.principal)
  request.chat = resolution.kind === 'chat' ? resolution.chatId : null
  return resolution
}

/**
 * The browser Origin rule of chat routes (core/origin.ts, docs/architecture.md#security-model), as an onRequest
 * hook of the encapsulated routes plugin that calls it (it then covers only that plugin's routes,
 * HTTP and WebSocket alike), plus answers to CORS preflights on `preflightPaths`.
 *
 * An accepted Origin is echoed in `Access-Control-Allow-Origin` (never `*`, never with credentials:
 * no ambient credentials exist, tokens travel in the URL or Authorization); a WebSocket upgrade or a
 * state-changing request from an Origin that is not accepted is refused with 403 before anything
 * else runs; a cross-origin read from such an Origin is answered without CORS headers, which keeps
 * the answer from the page. Preflights (methods `GET, POST, OPTIONS`, headers `Authorization,
 * Content-Type`) are for pages like the preview, embedded in an opaque-origin iframe in protected
 * mode, whose control calls carry a Bearer token and a JSON body. `ownOrigin` names an origin a request
 * is served on besides the server's (an app on its own origin, plugins/ports): that Origin is same-origin
 * for it, accepted without CORS headers.
 */
export function chatRoutes (fastify: FastifyInstance, preflightPaths: readonly string[] = [], ownOrigin?: (request: FastifyRequest) => string | undefined): void {
  const { origins } = fastify
  fastify.addHook('onRequest', async (request, reply) => {
    reply.header('Vary', 'Origin')
    const own = ownOrigin?.(request)
    if (own !== undefined && request.headers.origin === own) return
    const allow = origins.corsOrigin(request)
    if (allow !== undefined) {
      reply.header('Access-Control-Allow-Origin', allow)
      return
    }
    if (origins.refuses(request)) {
      request.log.warn({ origin: String(request.headers.origin).slice(0, 300) }, 'refused a chat-route request from an Origin that is not allowed')
      throw new CORE_FORBIDDEN_ORIGIN()
    }
  })
  for (const path of preflightPaths) {
    fastify.options(path, async (_request, reply) => await reply.code(204)
      .header('Access-Control-Allow-Methods', 'GET, POST, OPTIONS')
      .header('Access-Control-Allow-Headers', 'Authorization, Content-Type')
      .header('Access-Control-Max-Age', '600')
      .send())
  }
}
