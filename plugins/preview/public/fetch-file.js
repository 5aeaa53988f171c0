// Fetches a file's bytes in the page (the only place a token-bearing URL is used) with a hard size cap: the
// listing's size may be stale, so the body is counted as it arrives and the download stops past the cap.

export class TooLargeError extends Error {
  constructor (limit) {
    super(`larger than the preview limit of ${limit >= 1048576 ? `${Math.round(limit / 1048576)} MB` : `${limit} bytes`}`)
    this.name = 'TooLargeError'
  }
}

export async function fetchBytes (url, limit, signal) {
  const res = await fetch(url, { cache: 'no-store', credentials: 'omit', signal })
  if (!res.ok) throw new Error(`the server answered HTTP ${res.status}`)
  const declared = Number(res.headers.get('content-length') ?? NaN)
  if (declared > limit) { await res.body?.cancel(); throw new TooLargeError(limit) }
  const reader = res.body.getReader()
  const chunks = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > limit) { await reader.cancel(); throw new TooLargeError(limit) }
    chunks.push(value)
  }
  const bytes = new Uint8Array(size)
  let offset = 0
  for (const chunk of chunks) { bytes.set(chunk, offset); offset += chunk.byteLength }
  return bytes.buffer
}
