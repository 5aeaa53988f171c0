/*
 * The browser Origin rule of surface.md §2.6 item 6 (DNS-rebinding defence), in one place so that
 * every route that checks an Origin (/mcp today; the WebSocket routes of §7.3 can use the same
 * function) agrees on what "our own origin" means:
 *
 * - the origin of PUBLIC_BASE_URL and each ALLOWED_ORIGINS entry, compared as serialised origins;
 * - loopback spellings of the public origin (`localhost`, `127.0.0.1`, `[::1]` with the same scheme
 *   and port) are the same origin;
 * - while PUBLIC_BASE_URL is unset (the default), `http://` loopback origins on the port this
 *   connection arrived on (the listening port, read from the socket) are our own pages;
 * - never the request's `Host` header: a rebinding attacker controls it together with the Origin.
 */

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]'])
const DEFAULT_PORTS: Record<string, number> = { 'http:': 80, 'https:': 443 }
/** Origins are short; anything longer is refused before it is parsed. */
const MAX_ORIGIN_LENGTH = 300

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
