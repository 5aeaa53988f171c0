import { randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerOptions } from 'node:http'
import Fastify, { type FastifyInstance, type FastifyPluginAsync, type FastifyPluginCallback, type FastifyServerOptions } from 'fastify'
import swagger from '@fastify/swagger'
import websocket from '@fastify/websocket'
import FindMyWay from 'find-my-way'
import type { AppConfig } from './config.js'
import { createAuthService, type AuthService } from './auth.js'
import { createReadinessService, type ReadinessService } from './readiness.js'
import { createOriginService, type OriginService } from './origin.js'
import { decorateRequestState } from './route-kit.js'
import { errorHandler } from './error-handler.js'
import { CORE_METHOD_NOT_ALLOWED, CORE_ROUTE_NOT_FOUND, errorBody } from './errors.js'
import { redactUrl } from './tokens.js'
import { fastifyTrustProxy } from './trust-proxy.js'
import { HEALTH_SCHEMA, openapiOptions, READY_SCHEMA } from './openapi.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Credentials: API key and the capability-token hook (core/auth.ts). */
    auth: AuthService
    /** /ready checks that plugins register (core/readiness.ts). */
    readiness: ReadinessService
    /** The browser Origin rule of chat routes and their WebSockets (core/origin.ts). */
    origins: OriginService
    /**
     * Adds a rewrite of request URLs before routing (HTTP and WebSocket upgrades alike), for a plugin that
     * serves whole hosts (ports: an app on its own origin). The first rewrite that answers a URL wins;
     * undefined leaves the request to the next one. Runs on every request: keep it cheap and bounded.
     */
    addUrlRewrite: (rewrite: UrlRewrite) => void
  }
}

/** A URL for the router, or undefined (not this rewrite's request). */
export type UrlRewrite = (request: IncomingMessage) => string | undefined

/** One line of the manifest: a plugin and its options, tied together so a typo fails tsc. */
export interface Entry { register: (app: FastifyInstance) => Promise<unknown> }
export function entry<O extends object> (plugin: FastifyPluginAsync<O> | FastifyPluginCallback<O>, opts: O): Entry {
  return { register: async app => await app.register(plugin as FastifyPluginAsync<O>, opts) }
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

const SECRET_HEADERS = ['authorization', 'cookie', 'x-api-key', 'x-gitlab-token', 'x-openwebui-gitlab-token',
  'x-anthropic-api-key', 'x-openwebui-anthropic-api-key', 'x-mcp-tokens-api-key', 'x-openwebui-mcp-tokens-api-key', 'x-internal-api-key']

export interface BuildOptions {
  /** Replaces the whole logger configuration (tests pass false). */
  logger?: FastifyServerOptions['logger']
  /** Keeps the server's logger configuration (redaction included) but writes to this stream. */
  logStream?: { write: (line: string) => void }
}

export interface SocketTimeouts {
  requestTimeout: number
  connectionTimeout: number
  keepAliveTimeout: number
  http: ServerOptions
}

/**
 * Socket timeouts. `requestTimeout` bounds how long a client may take to *send* a
 * request (headers and body: slow uploads, slowloris); it never cuts a response, so SSE streams,
 * long tool calls and WebSockets (which leave the HTTP parser on upgrade) are unaffected.
 * No idle-socket timeout (`connectionTimeout` stays 0): a tool call answered as plain JSON is
 * silent until it ends, which may take as long as a sub-agent run; idle phases are bounded by
 * `headersTimeout` (nothing sent yet), `requestTimeout` and `keepAliveTimeout` (between requests).
 */
export function socketTimeouts (requestTimeoutS: number): SocketTimeouts {
  const requestTimeout = requestTimeoutS * 1000
  return {
    requestTimeout,
    connectionTimeout: 0,
    // Longer than the 60 s idle timeout of common load balancers, so they close first (no 502 races).
    keepAliveTimeout: 72_000,
    http: {
      // Node requires headersTimeout ≤ requestTimeout; it also closes connections that send nothing.
      headersTimeout: requestTimeout === 0 ? 60_000 : Math.min(60_000, requestTimeout),
      // How often Node checks both; its 30 s default would make a short timeout fire up to 30 s late.
      connectionsCheckingInterval: requestTimeout === 0 ? 30_000 : Math.min(30_000, Math.max(250, Math.floor(requestTimeout / 4)))
    }
  }
}

/** Builds the app from the config and the plugin manifest. Never listens (tests inject or listen on port 0). */
export async function buildApp (config: AppConfig, entries: Entry[], opts: BuildOptions = {}): Promise<FastifyInstance> {
  const rewrites: UrlRewrite[] = []
  const app = Fastify({
    rewriteUrl: request => {
      for (const rewrite of rewrites) {
        const url = rewrite(request)
        if (url !== undefined) return url
      }
      return request.url ?? '/'
    },
    logger: opts.logger ?? {
      level: config.logLevel,
      redact: { paths: [...SECRET_HEADERS.map(h => `req.headers["${h}"]`), '*.token', '*.apiKey'], censor: '[redacted]' },
      serializers: {
        req: (req: { method: string, url: string, id: string, ip?: string }) => ({ method: req.method, url: redactUrl(req.url), reqId: req.id, remoteAddress: req.ip })
      },
      ...(opts.logStream === undefined ? {} : { stream: opts.logStream })
    },
    trustProxy: fastifyTrustProxy(config.trustProxy),
    ...socketTimeouts(config.REQUEST_TIMEOUT),
    genReqId: req => {
      const given = req.headers['x-request-id']
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID()
    },
    routerOptions: { ignoreTrailingSlash: false, maxParamLength: 2048 },
    // A plugin may do real work while it loads (the oauth plugin loads oidc-provider and, on first
    // start, generates RSA keys: 9 s together on a 2-core host at load 20). avvio's 10 s default
    // would stop such a boot; a plugin that truly hangs still fails, after a minute.
    pluginTimeout: 60_000
  })

  // A mirror of every route lets the not-found handler answer 405 with Allow for a known path (docs/contract.md#general-http-rules).
  const mirror = FindMyWay()
  app.addHook('onRoute', route => {
    const methods = Array.isArray(route.method) ? route.method : [route.method]
    for (const method of methods) {
      try { mirror.on(method as FindMyWay.HTTPMethod, route.url, () => {}) } catch { /* duplicate from HEAD exposure */ }
    }
  })
  app.addHook('onRequest', async (request, reply) => {
    reply.header('X-Request-Id', request.id)
    reply.header('Referrer-Policy', 'no-referrer')
  })
  // Every 401 carries the challenge core/auth.ts computes for its route (RFC 9728 resource_metadata
  // where a plugin accepts its own tokens, docs/contract.md#oauth), whoever answered: the error handler, or a
  // route that replies 401 itself (mcp-transport answers before any body parsing).
  app.addHook('onSend', async (request, reply, payload) => {
    if (reply.statusCode === 401) reply.header('WWW-Authenticate', app.auth.challenge(request))
    return payload
  })
  app.setErrorHandler(errorHandler)
  app.setNotFoundHandler(async (request, reply) => {
    const path = request.url.split('?')[0] ?? '/'
    const allowed = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH']
      .filter(m => mirror.find(m as FindMyWay.HTTPMethod, path) !== null)
    // A wildcard route that found no file (static assets) calls the not-found handler for a method it serves: 404.
    if (allowed.length > 0 && !allowed.includes(request.method)) {
      return await reply.code(405).header('Allow', allowed.join(', '))
        .send(errorBody(new CORE_METHOD_NOT_ALLOWED(request.method, allowed.join(', '))))
    }
    return await reply.code(404).send(errorBody(new CORE_ROUTE_NOT_FOUND()))
  })

  // request.chat and request.principal: null on every request until core's route kit sets them.
  decorateRequestState(app)
  app.decorate('auth', createAuthService({ apiKey: config.MCP_API_KEY }))
  app.decorate('origins', createOriginService({
    publicBaseUrl: config.publicBaseUrl,
    publicBaseUrlSet: config.publicBaseUrlSet,
    allowedOrigins: config.allowedOrigins,
    protectedMode: app.auth.protectedMode
  }))
  app.decorate('readiness', createReadinessService({ timeoutMs: 2000, cacheMs: 5000 }))
  app.decorate('addUrlRewrite', (rewrite: UrlRewrite) => { rewrites.push(rewrite) })
  // Before any route: @fastify/swagger collects every route's schema as it is added (GET /openapi.json).
  await app.register(swagger, openapiOptions(config.publicBaseUrl))
  await app.register(websocket, { options: { maxPayload: 32 * 1024 * 1024 }, preClose: closeWebSockets })

  app.get('/health', { schema: HEALTH_SCHEMA }, async () => ({ status: 'healthy' }))
  app.get('/ready', { schema: READY_SCHEMA }, async (request, reply) => {
    const { ok, body } = await app.readiness.run()
    return await reply.code(ok ? 200 : 503).header('Cache-Control', 'no-store').send(body)
  })

  for (const e of entries) await e.register(app)
  return app
}

/** How long a WebSocket peer has to answer the server's close frame on shutdown before its socket is cut. */
export const WS_CLOSE_GRACE_MS = 2000

/**
 * @fastify/websocket's preClose, bounded: every client gets a close frame (1001), and one whose peer has not
 * answered within WS_CLOSE_GRACE_MS is terminated. server.close() waits for every upgraded socket, and ws
 * only destroys an unanswered one after its own 30 s, so a frozen or vanished viewer (a browser under load, a
 * peer whose host went away) held app.close() that long per socket.
 */
async function closeWebSockets (this: FastifyInstance): Promise<void> {
  const clients = [...this.websocketServer.clients]
  const closed = clients.map(async ws => {
    if (ws.readyState === ws.CLOSED) return
    await new Promise<void>(resolve => { ws.once('close', () => { resolve() }) })
  })
  for (const ws of clients) if (ws.readyState === ws.OPEN) ws.close(1001, 'server shutting down')
  let timer: NodeJS.Timeout | undefined
  await Promise.race([Promise.all(closed), new Promise(resolve => { timer = setTimeout(resolve, WS_CLOSE_GRACE_MS) })])
  clearTimeout(timer)
  const cut = clients.filter(ws => ws.readyState !== ws.CLOSED)
  if (cut.length > 0) this.log.info({ sockets: cut.length, graceMs: WS_CLOSE_GRACE_MS }, 'WebSocket peers did not answer the close frame in time: their sockets are cut')
  for (const ws of cut) ws.terminate()
  await new Promise<void>(resolve => { this.websocketServer.close(() => { resolve() }) })
}
