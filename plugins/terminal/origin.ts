/**
 * WebSocket Origin policy (surface.md §7.3 item 2): the origin of PUBLIC_BASE_URL, each of
 * ALLOWED_ORIGINS, `null` (the preview runs in opaque-origin iframes) and no Origin at all
 * (non-browser clients). Tokens are the real protection; this is defence in depth against
 * cross-site WebSocket hijacking.
 */
export function createOriginCheck (publicBaseUrl: string, allowedOrigins: string[]): (origin: string | undefined) => boolean {
  const allowed = new Set<string>()
  for (const raw of [publicBaseUrl, ...allowedOrigins]) {
    const origin = normalize(raw)
    if (origin !== null) allowed.add(origin)
  }
  return origin => {
    if (origin === undefined || origin === 'null') return true
    const normal = normalize(origin)
    return normal !== null && allowed.has(normal)
  }
}

function normalize (raw: string): string | null {
  if (raw.length > 2048) return null
  try {
    const url = new URL(raw)
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : null
  } catch { return null }
}
