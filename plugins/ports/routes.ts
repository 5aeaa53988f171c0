import type { FastifyPluginAsync, FastifyReply, FastifyRequest, onRequestHookHandler, preHandlerHookHandler } from 'fastify'
import type WebSocket from 'ws'
import type { OutgoingHttpHeaders } from 'node:http'
import { chatAccess, chatOf, chatParam, chatRoutes, grantChat, linkToken } from '../../core/route-kit.js'
import { definitionOf } from '../../core/errors.js'
import type { AppConnection } from './connection.js'
import { ourCookie, requestHeaders, tokenCookie, withoutToken, type AppView } from './headers.js'
import { appPort } from './listening.js'
import { PORTS_APP_ORIGIN_UNKNOWN, PORTS_INVALID_PORT, PORTS_RESERVED_PORT, PORTS_USE_APP_ORIGIN } from './errors.js'
import { CHAT_COOKIE, UNKNOWN_APP_PATH, type AppOrigins } from './origin.js'
import { errorPage } from './page.js'
import { relayHttp, type ProxyLimits } from './proxy.js'
import { AppBody, AppParams, AppPathParams, AppQuery, AppsReply, ChatParams } from './schemas.js'
import { ChatQuery, HAND_CHECKED } from '../../core/route-schema.js'
import type { PortsRuntime } from './service.js'
import { relaySocket, type SocketLimits } from './websocket.js'

export interface PortsRoutesOptions {
  runtime: PortsRuntime
  publicBaseUrl: string
  limits: ProxyLimits & SocketLimits
  /** APPS_DOMAIN set: every app on its own origin (origin.ts), the path form redirects there */
  appOrigins?: AppOrigins
  /** the sandbox's own services (the browser's debugging port, the egress relay): never listed, never served as apps */
  hiddenPorts: ReadonlySet<number>
}

interface AppRoute { Params: { chat: string, port: string } }

const NO_STORE = 'no-cache, no-store'
const OTHER_METHODS = ['DELETE', 'PATCH', 'POST', 'PUT', 'OPTIONS'] as const

/** The raw path after `/apps/<chat>/<port>` (encoding kept) and the raw query: what the app gets. */
function split (rawUrl: string): { inner: string, search: string, segments: string[] } {
  const q = rawUrl.indexOf('?')
  const path = q < 0 ? rawUrl : rawUrl.slice(0, q)
  const search = q < 0 ? '' : rawUrl.slice(q)
  const parts = path.split('/')
  // ['', 'apps', chat, port, ...rest]
  return { inner: parts.length > 4 ? `/${parts.slice(4).join('/')}` : '', search, segments: parts.slice(2, 4) }
}

/** `/apps/<chat>/<port>/…` (docs/features.md#app-preview-urls) and the list of a chat's apps. */
const routes: FastifyPluginAsync<PortsRoutesOptions> = async (fastify, opts) => {
  const { runtime, limits, appOrigins } = opts
  const { auth, sandbox } = fastify
  const base = new URL(opts.publicBaseUrl)
  const basePath = base.pathname.replace(/\/+$/, '')
  const secure = base.protocol === 'https:'
  const viewOf = (chatId: string, port: number, request: FastifyRequest): AppView => {
    const own = appOrigins?.hostOf(request.raw)
    // On its own origin the app sits at the root; another port of the chat is another origin.
    if (own !== undefined && appOrigins !== undefined) {
      return { port, prefix: '', prefixOf: p => appOrigins.originOf(chatId, p), publicOrigin: own.origin, publicHost: own.host, publicProto: secure ? 'https' : 'http' }
    }
    return {
      port,
      prefix: `${basePath}/apps/${chatId}/${port}`,
      prefixOf: p => `${basePath}/apps/${chatId}/${p}`,
      publicOrigin: base.origin,
      publicHost: base.host,
      publicProto: secure ? 'https' : 'http'
    }
  }
  const ours = (authorization: string): boolean => {
    const token = /^\s*bearer\s+(\S+)\s*$/i.exec(authorization.slice(0, 4096))?.[1]
    return token !== undefined && (auth.isApiKey(token) || token.startsWith('v1.'))
  }

  chatRoutes(fastify, [], request => appOrigins?.hostOf(request.raw)?.origin)
  // Bodies are relayed as they come, never parsed here.
  fastify.removeAllContentTypeParsers()
  fastify.addContentTypeParser('*', (_request, payload, done) => { done(null, payload) })

  // A browser navigation that cannot reach the app gets a page saying why; everything else the usual JSON error.
  fastify.setErrorHandler(async (err, request, reply) => {
    const definition = definitionOf(err)
    const navigation = request.headers['sec-fetch-mode'] === 'navigate' || (request.headers.accept ?? '').startsWith('text/html')
    if (definition === undefined || !navigation || request.ws || (definition.statusCode >= 500 && !definition.code.startsWith('PORTS_'))) throw err
    const headers = (err as { headers?: Record<string, string> }).headers ?? {}
    return await reply.code(definition.statusCode).headers(headers).header('Cache-Control', NO_STORE)
      .header('Content-Security-Policy', 'default-src \'none\'; style-src \'unsafe-inline\'')
      .type('text/html; charset=utf-8').send(errorPage(definition.statusCode, (err as Error).message))
  })

  // The chat (400), then the chat's control token from `?t=` or the app's cookie, or the API key
  // (401/403), before a body is read or a socket upgraded; then the port (400). Synchronous, as a
  // callback hook: no promise per proxied request (docs/performance.md, (k)). Answers the URL to
  // redirect to when the app has an origin of its own (APPS_DOMAIN).
  const check = (request: FastifyRequest): string | undefined => {
    const cookie = ourCookie(request.headers.cookie)
    // chatAccess lets CORS preflights through untouched; here an OPTIONS goes to the app, so it needs credentials too.
    if (request.method === 'OPTIONS') auth.authorizeChat(request, chatParam(request), 'c', cookie)
    else grantChat(request, 'c', cookie)
    const port = appPort((request.params as { port: string }).port)
    if (port === undefined) throw new PORTS_INVALID_PORT()
    if (opts.hiddenPorts.has(port)) throw new PORTS_RESERVED_PORT(String(port))
    // With APPS_DOMAIN the server's own origin never serves an app: the path form points at the app's origin.
    if (appOrigins !== undefined && appOrigins.hostOf(request.raw) === undefined) {
      const chatId = chatOf(request)
      appOrigins.remember(chatId)
      const { inner, search } = split(request.raw.url ?? '/')
      const to = `${appOrigins.originOf(chatId, port)}${inner === '' ? '/' : inner}${search}`
      if (request.ws) throw new PORTS_USE_APP_ORIGIN(to.split('?')[0] as string)
      return to
    }
    return undefined
  }
  const access: onRequestHookHandler = function (request, reply, done) {
    let to: string | undefined
    try { to = check(request) } catch (err) { done(err as Error); return }
    if (to === undefined) { done(); return }
    // An answer from the hook: done is not called.
    void reply.header('Cache-Control', NO_STORE).redirect(to, request.method === 'GET' || request.method === 'HEAD' ? 303 : 307)
  }

  const target = (request: FastifyRequest): { chatId: string, port: number, view: AppView, inner: string, search: string, canonical: boolean } => {
    const chatId = chatOf(request)
    const port = appPort((request.params as { port: string }).port) as number
    const { inner, search, segments } = split(request.raw.url ?? '/')
    return { chatId, port, view: viewOf(chatId, port, request), inner, search, canonical: segments[0] === chatId && segments[1] === String(port) }
  }

  const http = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const { chatId, view, inner, search, canonical } = target(request)
    const token = linkToken(request)
    const hasToken = /(?:^\?|&)t=/.test(search)
    // The cookie's path must be the one the browser uses: `/apps/<chat>/<port>/`, in canonical spelling.
    if (!canonical || inner === '' || (hasToken && token !== undefined && (request.method === 'GET' || request.method === 'HEAD'))) {
      if (hasToken && token !== undefined) {
        const cookies = [tokenCookie(token, view.prefix, secure)]
        // On the app's own origin: which chat it is, for after a server restart (origin.ts; checked against the host's key).
        if (view.prefix === '') cookies.push(`${CHAT_COOKIE}=${chatId}; Path=/; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`)
        reply.header('Set-Cookie', cookies)
      }
      // The token leaves the URL (history, the app's Referer) once it is in the cookie.
      const keep = hasToken && token !== undefined ? withoutToken(search) : search
      await reply.header('Cache-Control', NO_STORE).redirect(`${view.prefix}${inner === '' ? '/' : inner}${keep}`, request.method === 'GET' || request.method === 'HEAD' ? 303 : 307)
      return
    }
    await runtime.requireRunning(chatId)
    sandbox.touch(chatId)
    const release = sandbox.lease(chatId, { kind: 'socket' })
    try {
      // Core's no-referrer yields to same-origin (the app's own policy wins): pages of an app may need
      // their Referer (CSRF checks), and a Referer from outside the app never reaches it (headers.ts).
      const hasBody = request.body !== undefined && request.body !== null && typeof (request.body as { pipe?: unknown }).pipe === 'function'
      const ourHeaders = reply.getHeaders() as OutgoingHttpHeaders
      ourHeaders['referrer-policy'] = 'same-origin'
      await relayHttp(runtime.agent(chatId), {
        method: request.method,
        path: `${inner}${withoutToken(search)}`,
        headers: requestHeaders(request.headers, view, { ours }),
        body: hasBody ? request.body as NodeJS.ReadableStream as never : undefined,
        view
      }, reply, limits, ourHeaders)
    } finally {
      release()
    }
  }

  // Relay connections opened before the upgrade (so a stopped sandbox or the cap is a plain HTTP answer), by handshake
  // request. A callback hook: a plain HTTP request passes without a promise.
  const opened = new WeakMap<FastifyRequest, AppConnection>()
  const openSocket: preHandlerHookHandler = function (request, _reply, done) {
    if (!request.ws) { done(); return }
    const { chatId, port } = target(request)
    runtime.requireRunning(chatId).then(async () => await runtime.socket(chatId, port)).then(connection => {
      opened.set(request, connection)
      request.raw.socket.once('close', () => { if (opened.delete(request)) connection.destroy() })
      done()
    }, (err: Error) => { done(err) })
  }
  const websocket = (socket: WebSocket, request: FastifyRequest): void => {
    const connection = opened.get(request)
    opened.delete(request)
    if (connection === undefined) { socket.close(1011, 'no connection'); return }
    const { chatId, port, view, inner, search } = target(request)
    sandbox.touch(chatId)
    const release = sandbox.lease(chatId, { kind: 'socket' })
    relaySocket(socket, connection, {
      port,
      path: `${inner === '' ? '/' : inner}${withoutToken(search)}`,
      headers: requestHeaders(request.headers, view, { ours, websocket: true }),
      protocol: socket.protocol
    }, limits, release)
  }

  const summary = 'An app in the chat\'s sandbox: HTTP and WebSocket relayed to that port on its 127.0.0.1'
  for (const url of ['/apps/:chat/:port', '/apps/:chat/:port/*']) {
    const params = url.endsWith('*') ? AppPathParams : AppParams
    fastify.route<AppRoute>({
      method: 'GET',
      url,
      schema: { summary, tags: ['apps'], params, querystring: AppQuery },
      ...HAND_CHECKED,
      onRequest: access,
      preHandler: openSocket,
      handler: http,
      wsHandler: websocket
    })
    fastify.route<AppRoute>({
      method: [...OTHER_METHODS],
      url,
      schema: { summary, tags: ['apps'], params, querystring: AppQuery, body: AppBody },
      ...HAND_CHECKED,
      onRequest: access,
      handler: http
    })
  }

  // An app host whose chat the server does not know (origin.ts): say how to open it.
  const unknownApp = async (): Promise<never> => { throw new PORTS_APP_ORIGIN_UNKNOWN() }
  const unknownSummary = 'An app origin (APPS_DOMAIN) whose chat this server does not know: 404'
  fastify.route({ method: ['GET', 'HEAD'], url: UNKNOWN_APP_PATH, schema: { summary: unknownSummary, tags: ['apps'], hide: true }, handler: unknownApp })
  fastify.route({ method: [...OTHER_METHODS], url: UNKNOWN_APP_PATH, schema: { summary: unknownSummary, tags: ['apps'], body: AppBody, hide: true }, handler: unknownApp })

  fastify.get<{ Params: { chat: string } }>('/api/apps/:chat', {
    schema: { summary: 'The chat\'s apps: ports listening in its sandbox, with their URLs', tags: ['apps'], params: ChatParams, querystring: ChatQuery, response: { 200: AppsReply } },
    onRequest: chatAccess('c')
  }, async (request, reply) => {
    // The caller holds a control token (or the key): its links carry that token, so they open in a new tab too.
    const token = linkToken(request)
    const apps = (await runtime.service.apps(chatOf(request))).map(a => ({ port: a.port, url: token === undefined ? a.url : `${a.url}?t=${token}` }))
    return await reply.header('Cache-Control', NO_STORE).send({ apps })
  })
}

export default routes
