/*
 * Where an authorization code goes. The sign-in and consent pages name the destination of the
 * request at hand (its redirect_uri), never the client's own name alone: anyone can register a
 * client called "Claude". Hosts are shown in their ASCII form (WHATWG URL parsing turns an
 * internationalised name into punycode), so a look-alike such as a Cyrillic "а" in "clаude.ai"
 * shows up as `xn--…`. Registration refuses a client whose redirect URIs span more than one host
 * (loopback ones aside), so one client_id cannot stand for two destinations.
 */

/** The redirect URI of one authorization request, as the pages show it. */
export interface Destination {
  /** What the code goes to: `host[:port]` for http(s), `scheme://host` for an app's own scheme; ASCII. */
  host: string
  /** web: a site; loopback: a program on the user's own device; app: an app's own URL scheme; unknown: none. */
  kind: 'web' | 'loopback' | 'app' | 'unknown'
}

const LOOPBACK = new Set(['127.0.0.1', '[::1]', 'localhost'])
const MAX_SHOWN = 200

function parse (uri: string): URL | undefined {
  try { return new URL(uri) } catch { return undefined }
}

export function isLoopback (url: URL): boolean {
  return (url.protocol === 'http:' || url.protocol === 'https:') && LOOPBACK.has(url.hostname)
}

/** The destination of a redirect URI; `unknown` when there is none or it does not parse. */
export function destinationOf (uri: string | undefined): Destination {
  const url = uri === undefined ? undefined : parse(uri)
  if (url === undefined) return { host: 'unknown', kind: 'unknown' }
  if (url.protocol === 'http:' || url.protocol === 'https:') {
    return { host: url.host.slice(0, MAX_SHOWN), kind: isLoopback(url) ? 'loopback' : 'web' }
  }
  // A non-special scheme keeps its host opaque (percent-encoded, so still ASCII).
  return { host: `${url.protocol}//${url.host}`.slice(0, MAX_SHOWN), kind: 'app' }
}

/** The host a redirect URI hands its code to, for comparing URIs: scheme-less for web URIs, with the scheme for an app's own. */
function hostKey (url: URL): string {
  return url.protocol === 'http:' || url.protocol === 'https:' ? url.hostname : `${url.protocol}//${url.hostname}`
}

/**
 * Why a registration's redirect URIs are refused, or undefined when they are fine: more than one
 * host, unless every URI is loopback (127.0.0.1, [::1], localhost, any port). Values that are not
 * strings or URLs are left to the provider's own validation.
 */
export function redirectHostsProblem (uris: unknown): string | undefined {
  if (!Array.isArray(uris)) return undefined
  const urls = uris.filter((u): u is string => typeof u === 'string').map(parse).filter((u): u is URL => u !== undefined)
  if (urls.every(isLoopback)) return undefined
  const hosts = [...new Set(urls.map(hostKey))]
  if (hosts.length <= 1) return undefined
  const shown = hosts.slice(0, 4).map(h => h.slice(0, 80)).join(', ') + (hosts.length > 4 ? ', …' : '')
  return `redirect_uris span more than one host (${shown}); the sign-in page can show only one destination, so register one client per host (only loopback redirect URIs may mix hosts and ports)`
}

/** True for the client_id of a Client ID Metadata Document, an https URL (client-metadata.ts); DCR ids are random base64url. */
export const isMetadataDocumentClient = (clientId: string): boolean => clientId.startsWith('https://')
