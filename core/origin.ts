import type { FastifyRequest } from 'fastify'
import { tokenOfPathSegment } from './tokens.js'

/*
 * The one browser Origin rule of this server, for /mcp and for every chat route (HTTP and
 * WebSocket), so that all of them agree on what "our own origin" means (docs/architecture.md#security-model):
 *
 * - the origin of PUBLIC_BASE_URL and each ALLOWED_ORIGINS entry, compared as serialised origins;
 * - loopback spellings of the public origin (`localhost`, `127.0.0.1`, `[::1]` with the same scheme
 *   and port) are the same origin;
 * - while PUBLIC_BASE_URL is unset (the default), `http://` loopback origins on the port this
 *   connection arrived on (the listening port, read from the socket) are our own pages;
 * - never the request's `Host` header: a rebinding attacker controls it together with the Origin.
 *
 * Chat routes add one case, the opaque origin `null` (a page in a sandboxed iframe, or a file served
 * with `CSP: sandbox`): it is accepted only in protected mode and only on a request that presents a
 * credential (a capability token in `t` or a `~token` path segment, or a Bearer header), which the
 * route then verifies for its chat and scope. Our preview and terminal pages carry the token they
 * were opened with, so they keep working inside Open WebUI's sandboxed iframe; any other opaque page
 * would need a token for that chat, which is the capability itself. In open mode there are no
 * tokens, so `null` is never accepted: otherwise any web page could frame itself in a sandboxed
 * iframe and reach a shell. A request without `Origin` comes from a non-browser client (browsers
 * send Origin on every WebSocket handshake and on every cross-origin or non-GET fetch) and is not
 * affected.
 */

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]'])
const DEFAULT_PORTS: Record<string, number> = { 'http:': 80, 'https:': 443 }
/** Origins are short; anything longer is refused before it is parsed. */
const MAX_ORIGIN_LENGTH = 300
/** Methods a cross-origin request may make without changing anything. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS'])

export interface OriginPolicyOptions {
  /** PUBLIC_BASE_URL after defaults (an absolute http(s) URL). */
  publicBaseUrl: string
  /** false while PUBLIC_BASE_URL is unset: loopback origins on the listening port are then accepted. */
  publicBaseUrlSet: boolean
  /** ALLOWED_ORIGINS entries (scheme://host[:port]). */
  allowedOrigins: readonly string[]
}

/**
 * What an Origin header is to us: an ALLOWED_ORIGINS entry (callers may send CORS headers for it),
 * our own origin under one of its spellings, or foreign (refuse with 403).
 */
export type OriginVerdict = 'listed' | 'own' | 'foreign'

interface ParsedOrigin { scheme: string, host: string, port: number }

/** Parses a serialised origin (`scheme://host[:port]`, lowercase, no path); anything else is undefined. */
function parseOrigin (value: string): ParsedOrigin | undefined {
  if (value.length > MAX_ORIGIN_LENGTH) return undefined
  let url: URL
  try { url = new URL(value) } catch { return undefined }
  const defaultPort = DEFAULT_PORTS[url.protocol]
  if (defaultPort === undefined || url.origin !== value) return undefined
  return { scheme: url.protocol, host: url.hostname, port: url.port === '' ? defaultPort : Number(url.port) }
}

const key = (o: ParsedOrigin): string => `${o.scheme}//${o.host}:${o.port}`

function parseConfigured (value: string, what: string): ParsedOrigin {
  let origin: string
  try { origin = new URL(value).origin } catch { throw new TypeError(`${what} '${value}' is not an http(s) URL`) }
  const parsed = parseOrigin(origin)
  if (parsed === undefined) throw new TypeError(`${what} '${value}' is not an http(s) URL`)
  return parsed
}

/** Builds the check once (at plugin registration); each call is a URL parse and two set lookups. */
export function createOriginPolicy (opts: OriginPolicyOptions): (origin: string, listeningPort: number | undefined) => OriginVerdict {
  const own = parseConfigured(opts.publicBaseUrl, 'PUBLIC_BASE_URL')
  const listed = new Set(opts.allowedOrigins.map(o => key(parseConfigured(o, 'ALLOWED_ORIGINS entry'))))
  const ownIsLoopback = LOOPBACK_HOSTS.has(own.host)
  return (origin, listeningPort) => {
    const o = parseOrigin(origin)
    if (o === undefined) return 'foreign'
    if (listed.has(key(o))) return 'listed'
    if (key(o) === key(own)) return 'own'
    if (!LOOPBACK_HOSTS.has(o.host)) return 'foreign'
    if (ownIsLoopback && o.scheme === own.scheme && o.port === own.port) return 'own'
    if (!opts.publicBaseUrlSet && o.scheme === 'http:' && listeningPort !== undefined && o.port === listeningPort) return 'own'
    return 'foreign'
  }
}

/** The Origin rule of chat routes, decorated by core as `fastify.origins`. */
export interface OriginService {
  /** The verdict of core's policy (own, listed, foreign) for a serialised origin. */
  verdict (origin: string, listeningPort: number | undefined): OriginVerdict
  /**
   * True when this chat-route request (or WebSocket upgrade) may come from its Origin: none (a
   * non-browser client), our own or an ALLOWED_ORIGINS origin, or `null` with a credential in
   * protected mode (a CORS preflight, which never carries one, counts as presenting it).
   */
  accepts (request: FastifyRequest): boolean
  /**
   * The `Access-Control-Allow-Origin` value for a chat-route answer: the request's Origin when
   * `accepts` holds for it, else undefined (no CORS header: the browser keeps the answer from the page).
   */
  corsOrigin (request: FastifyRequest): string | undefined
  /**
   * Whether a chat route must refuse this request outright (403): a WebSocket upgrade, or a method
   * that changes something, from an Origin that `accepts` refuses. Cross-origin reads are not
   * refused, only left unreadable (no CORS header).
   */
  refuses (request: FastifyRequest): boolean
}

export interface OriginServiceOptions extends OriginPolicyOptions {
  /** MCP_API_KEY is set: chat routes verify a credential on every request. */
  protectedMode: boolean
}

/** A credential a chat route will verify: a Bearer header, a `t` query value, or a `~token` path segment. */
function presentsCredential (request: FastifyRequest): boolean {
  if (typeof request.headers.authorization === 'string' && request.headers.authorization.trim() !== '') return true
  const t = (request.query as Record<string, unknown> | undefined)?.t
  if (typeof t === 'string' && t !== '') return true
  const path = request.url.split('?', 1)[0] ?? ''
  return path.split('/').some(segment => tokenOfPathSegment(segment) !== undefined)
}

const isPreflight = (request: FastifyRequest): boolean =>
  request.method === 'OPTIONS' && request.headers['access-control-request-method'] !== undefined

const isUpgrade = (request: FastifyRequest): boolean =>
  (request.headers.upgrade ?? '').toLowerCase() === 'websocket'

export function createOriginService (opts: OriginServiceOptions): OriginService {
  const verdict = createOriginPolicy(opts)
  const service: OriginService = {
    verdict,
    accepts (request) {
      const origin = request.headers.origin
      if (origin === undefined) return true
      if (origin === 'null') return opts.protectedMode && (isPreflight(request) || presentsCredential(request))
      return verdict(origin, request.socket.localPort) !== 'foreign'
    },
    corsOrigin (request) {
      const origin = request.headers.origin
      return origin !== undefined && service.accepts(request) ? origin : undefined
    },
    refuses (request) {
      if (service.accepts(request)) return false
      return isUpgrade(request) || !SAFE_METHODS.has(request.method)
    }
  }
  return service
}
