/*
 * Upload resource URIs (docs/contract.md#tier-5-uploads-as-mcp-resources): file://uploads/{chat}/{enc}, where enc is the relative
 * path as UTF-8 with every byte outside A–Z a–z 0–9 - _ . ~ percent-encoded in uppercase hex, so `/`
 * becomes %2F and the whole path is one URI segment.
 */
const PREFIX = 'file://uploads/'
const UNRESERVED = /^[A-Za-z0-9\-_.~]$/

export function encodeRelPath (relPath: string): string {
  let out = ''
  for (const byte of Buffer.from(relPath, 'utf8')) {
    const c = String.fromCharCode(byte)
    out += byte < 0x80 && UNRESERVED.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`
  }
  return out
}

export function uploadUri (chatId: string, relPath: string): string {
  return `${PREFIX}${chatId}/${encodeRelPath(relPath)}`
}

/** The chat part and decoded relative path of an upload URI, or undefined when it is not one. */
export function parseUploadUri (uri: string): { chat: string, relPath: string } | undefined {
  if (!uri.startsWith(PREFIX)) return undefined
  const rest = uri.slice(PREFIX.length)
  const slash = rest.indexOf('/')
  if (slash <= 0 || slash === rest.length - 1) return undefined
  const encoded = rest.slice(slash + 1)
  if (encoded.includes('/')) return undefined // the path is always one encoded segment
  try {
    return { chat: rest.slice(0, slash), relPath: decodeURIComponent(encoded) }
  } catch { return undefined }
}
