/*
 * What crosses the proxy in headers (docs/features.md#app-preview-urls), pure and unit-tested. Towards the app:
 * none of our credentials (our cookie, a capability token or the API key in Authorization, a Referer
 * that may carry `?t=`), no hop-by-hop header, and the forwarding headers set by us, never the
 * client's. Back from the app (untrusted): no hop-by-hop header, nothing that widens its reach over our
 * origin (HSTS, Clear-Site-Data, Service-Worker-Allowed, Alt-Svc, credentialed CORS), every
 * Set-Cookie confined to the app's prefix without Domain, and a Location that stays in the prefix
 * when it points at the sandbox or at this server.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http'

/** The cookie that carries a chat's control token for one app prefix (HttpOnly, SameSite=Lax). */
export const COOKIE_NAME = 'cubicle_app'
/** Ours on an app's own origin too (origin.ts: the chat of the origin); never sent to the app, never set by it. */
const OUR_COOKIES = new Set([COOKIE_NAME, 'cubicle_app_chat'])

/** Where one app is seen from the browser. */
export interface AppView {
  port: number
  /** `<base path>/apps/<chat>/<port>`: the public path prefix, no trailing slash */
  prefix: string
  /** the same for another port of the chat (a redirect to localhost:<other port>) */
  prefixOf: (port: number) => string
  /** PUBLIC_BASE_URL's origin and host */
  publicOrigin: string
  publicHost: string
  publicProto: 'http' | 'https'
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'proxy-authenticate', 'proxy-authorization'])
/** Set by us or meaningful only to us: the client's values never reach the app. */
const OURS_IN = new Set(['host', 'forwarded', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-forwarded-prefix', 'x-forwarded-port', 'x-real-ip', 'x-chat-id', 'x-openwebui-chat-id', 'expect', 'content-length'])
/** What an app may not say on our origin. */
const REFUSED_OUT = new Set(['strict-transport-security', 'clear-site-data', 'service-worker-allowed', 'alt-svc', 'access-control-allow-credentials', 'public-key-pins', 'set-cookie', 'location', 'content-length'])
const WS_OWN = new Set(['sec-websocket-key', 'sec-websocket-version', 'sec-websocket-extensions', 'sec-websocket-protocol', 'sec-websocket-accept'])

const NONE: ReadonlySet<string> = new Set()
const KEEP_ALIVE: ReadonlySet<string> = new Set(['keep-alive'])
const CLOSE: ReadonlySet<string> = new Set(['close'])

/** Lower-cased names listed in a Connection header (they are hop-by-hop too, RFC 9110 section 7.6.1). */
function connectionListed (value: string | string[] | undefined): ReadonlySet<string> {
  // The usual values, without a Set and an array per request (docs/performance.md, (k)).
  if (value === undefined) return NONE
  if (value === 'keep-alive' || value === 'Keep-Alive') return KEEP_ALIVE
  if (value === 'close' || value === 'Close') return CLOSE
  const joined = Array.isArray(value) ? value.join(',') : value
  return new Set(joined.slice(0, 2048).split(',').map(s => s.trim().toLowerCase()).filter(s => s !== ''))
}

/** The Cookie header without ours; undefined when nothing is left. */
export function stripOurCookie (cookie: string | undefined): string | undefined {
  if (cookie === undefined) return undefined
  const kept = cookie.split(';').filter(part => !OUR_COOKIES.has(cookieName(part)))
  const joined = kept.map(s => s.trim()).filter(s => s !== '').join('; ')
  return joined === '' ? undefined : joined
}

/** Our cookie's value (the first one the browser sent: the most specific path), if any. */
export function ourCookie (cookie: string | undefined): string | undefined {
  if (cookie === undefined) return undefined
  for (const part of cookie.split(';')) {
    if (cookieName(part) !== COOKIE_NAME) continue
    const value = part.slice(part.indexOf('=') + 1).trim()
    if (value !== '') return value
  }
  return undefined
}

function cookieName (pair: string): string {
  const eq = pair.indexOf('=')
  return (eq < 0 ? '' : pair.slice(0, eq)).trim().toLowerCase()
}

export interface ForwardOptions {
  /** true when an `Authorization` value is one of our credentials (the API key, a capability token) */
  ours: (authorization: string) => boolean
  /** for a WebSocket: ws writes its own handshake headers */
  websocket?: boolean
}

/**
 * The headers the app gets for a request of the browser. One pass, no `delete` (which would turn the object
 * into a slow dictionary that the http client then walks): docs/performance.md, (k).
 */
export function requestHeaders (incoming: IncomingHttpHeaders, view: AppView, opts: ForwardOptions): OutgoingHttpHeaders {
  const listed = connectionListed(incoming.connection)
  const websocket = opts.websocket === true
  const out: OutgoingHttpHeaders = {}
  for (const name in incoming) {
    const value = incoming[name]
    if (value === undefined || HOP_BY_HOP.has(name) || OURS_IN.has(name) || listed.has(name)) continue
    if (websocket && WS_OWN.has(name)) continue
    if (name === 'cookie') {
      const kept = stripOurCookie(value as string)
      if (kept !== undefined) out.cookie = kept
      continue
    }
    if (name === 'authorization' && typeof value === 'string' && opts.ours(value)) continue
    // A Referer from outside the app (the preview page) may carry a token in its query.
    if (name === 'referer' && (typeof value !== 'string' || !value.startsWith(`${view.publicOrigin}${view.prefix}/`) || /[?&]t=/.test(value))) continue
    out[name] = value
  }
  out.host = view.publicHost
  out['x-forwarded-host'] = view.publicHost
  out['x-forwarded-proto'] = view.publicProto
  // At the root of its own origin the app has no prefix.
  if (view.prefix !== '') out['x-forwarded-prefix'] = view.prefix
  if (!websocket && incoming['content-length'] !== undefined) out['content-length'] = incoming['content-length']
  return out
}

/**
 * The headers the browser gets for an answer of the app (`raw`: Node's rawHeaders, name/value pairs), then
 * `ours` (lower-cased names) where the app set no header of that name.
 */
export function responseHeaders (raw: string[], view: AppView, innerPath: string, ours: OutgoingHttpHeaders = {}): OutgoingHttpHeaders {
  const names: string[] = new Array<string>(raw.length >> 1)
  let listed = NONE
  for (let i = 0; i < raw.length; i += 2) {
    const name = (raw[i] ?? '').toLowerCase()
    names[i >> 1] = name
    if (name === 'connection') listed = connectionListed(raw[i + 1])
  }
  const out: OutgoingHttpHeaders = {}
  let cookies: string[] | undefined
  for (let i = 0; i < raw.length; i += 2) {
    const name = names[i >> 1] as string
    const value = raw[i + 1] ?? ''
    if (name === 'set-cookie') {
      const rewritten = scopeSetCookie(value, view.prefix)
      if (rewritten !== undefined) (cookies ??= []).push(rewritten)
      continue
    }
    if (name === 'location') { out.location = rewriteLocation(value, innerPath, view); continue }
    if (name === 'content-length') { out[name] = value; continue }
    if (HOP_BY_HOP.has(name) || REFUSED_OUT.has(name) || listed.has(name) || name === '') continue
    const prev = out[name]
    if (prev === undefined) out[name] = value
    else if (Array.isArray(prev)) prev.push(value)
    else out[name] = [String(prev), value]
  }
  if (cookies !== undefined) out['set-cookie'] = cookies
  for (const name in ours) if (out[name] === undefined) out[name] = ours[name]
  return out
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '0.0.0.0', '[::1]', '[::]'])

/**
 * A Location of the app, kept inside the chat's apps: resolved against the URL the app saw, then a
 * URL of the sandbox (localhost, any port of the range) or of this server becomes a path under that
 * port's prefix (kept as is when it already is one); a URL of another site is left alone.
 */
export function rewriteLocation (location: string, innerPath: string, view: AppView): string {
  let url: URL
  try { url = new URL(location, `http://127.0.0.1:${view.port}${innerPath.startsWith('/') ? innerPath : '/'}`) } catch { return `${view.prefix}/` }
  const tail = `${url.pathname}${url.search}${url.hash}`
  const web = url.protocol === 'http:' || url.protocol === 'https:'
  if (url.origin === view.publicOrigin) return within(url.pathname, view.prefix) ? tail : `${view.prefix}${tail}`
  if (web && LOOPBACK.has(url.hostname)) {
    const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port)
    const prefix = port >= 1024 && port <= 65535 ? view.prefixOf(port) : view.prefix
    return within(url.pathname, prefix) ? tail : `${prefix}${tail}`
  }
  return location
}

const within = (path: string, prefix: string): boolean => path === prefix || path.startsWith(`${prefix}/`)

/**
 * A Set-Cookie of the app confined to its prefix: Domain dropped, Path moved under the prefix (kept
 * when already inside it); ours and `__Host-` cookies (which need Path=/) are dropped, as are values
 * over 4 KiB (what browsers keep anyway).
 */
export function scopeSetCookie (value: string, prefix: string): string | undefined {
  if (value.length > 4096) return undefined
  const [pair = '', ...attributes] = value.split(';')
  const name = cookieName(pair)
  if (name === '' || OUR_COOKIES.has(name) || name.startsWith('__host-')) return undefined
  const out = [pair.trim()]
  let path: string | undefined
  for (const attribute of attributes) {
    const key = cookieName(attribute.includes('=') ? attribute : `${attribute}=`)
    if (key === 'domain') continue
    if (key === 'path') { path = attribute.slice(attribute.indexOf('=') + 1).trim(); continue }
    if (attribute.trim() !== '') out.push(attribute.trim())
  }
  const scoped = path === undefined || !path.startsWith('/') ? `${prefix}/` : within(path, prefix) ? path : `${prefix}${path}`
  out.push(`Path=${scoped}`)
  return out.join('; ')
}

/** Our cookie for one app prefix, set when a request came with `?t=`. */
export function tokenCookie (token: string, prefix: string, secure: boolean): string {
  return `${COOKIE_NAME}=${token}; Path=${prefix}/; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`
}

/** The query without `t` (our token), raw encoding kept; '' or `?…`. */
export function withoutToken (search: string): string {
  if (search === '' || search === '?') return ''
  const kept = search.slice(1).split('&').filter(p => p !== 't' && !p.startsWith('t='))
  return kept.length === 0 ? '' : `?${kept.join('&')}`
}
