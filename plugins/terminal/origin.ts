import { createOriginPolicy, type OriginPolicyOptions } from '../../core/origin.js'

/**
 * WebSocket Origin rule (surface.md §7.3 item 2): core/origin.ts's rule of /mcp (§2.6 item 6: the
 * public origin and its loopback spellings, ALLOWED_ORIGINS, and while PUBLIC_BASE_URL is unset the
 * http loopback origin on the listening port; never the Host header), plus `null` (the preview runs
 * in opaque-origin iframes) and no Origin at all (non-browser clients). Tokens are the real
 * protection; this is defence in depth against cross-site WebSocket hijacking.
 */
export function createOriginCheck (opts: OriginPolicyOptions): (origin: string | undefined, listeningPort: number | undefined) => boolean {
  const verdict = createOriginPolicy(opts)
  return (origin, listeningPort) => origin === undefined || origin === 'null' || verdict(origin, listeningPort) !== 'foreign'
}
