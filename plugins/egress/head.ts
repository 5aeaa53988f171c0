/*
 * The first request of a proxy connection, parsed from at most MAX_HEAD bytes (pure, linear scans,
 * no regex over untrusted input beyond anchored single-line checks). Two forms are served:
 *   CONNECT host:port HTTP/1.1          → a tunnel (HTTPS, git over https, anything TCP)
 *   GET http://host[:port]/path HTTP/1.1 → one plain-HTTP request, forwarded in origin-form
 */

export const MAX_HEAD = 16 * 1024

export type Head =
  | { kind: 'connect', host: string, port: number }
  | { kind: 'http', host: string, port: number, head: Buffer }

/** Index just past the blank line ending the head, or -1. */
export function headEnd (buf: Buffer): number {
  const i = buf.indexOf('\r\n\r\n')
  return i < 0 ? -1 : i + 4
}

/** host[:port] of an authority; IPv6 in brackets. null when malformed. */
export function splitAuthority (authority: string, defaultPort: number | null): { host: string, port: number } | null {
  let host: string
  let portText: string | undefined
  if (authority.startsWith('[')) {
    const end = authority.indexOf(']')
    if (end < 0) return null
    host = authority.slice(1, end)
    const rest = authority.slice(end + 1)
    if (rest !== '' && !rest.startsWith(':')) return null
    portText = rest === '' ? undefined : rest.slice(1)
  } else {
    const colon = authority.indexOf(':')
    if (colon !== authority.lastIndexOf(':')) return null
    host = colon < 0 ? authority : authority.slice(0, colon)
    portText = colon < 0 ? undefined : authority.slice(colon + 1)
  }
  if (host === '' || host.length > 255) return null
  if (portText === undefined) return defaultPort === null ? null : { host, port: defaultPort }
  if (!/^\d{1,5}$/.test(portText)) return null
  const port = Number(portText)
  return port >= 1 && port <= 65535 ? { host, port } : null
}

const HOP_BY_HOP = new Set(['proxy-authorization', 'proxy-connection', 'connection', 'keep-alive'])

/** Parses a complete head (through the blank line). A string is the reason it was refused (400). */
export function parseHead (raw: Buffer): Head | string {
  const text = raw.toString('latin1')
  const lines = text.slice(0, -4).split('\r\n')
  const parts = (lines[0] ?? '').split(' ')
  if (parts.length !== 3 || !/^HTTP\/1\.[01]$/.test(parts[2] ?? '')) return 'malformed request line'
  const [method = '', target = ''] = parts
  if (!/^[A-Z]{1,16}$/.test(method)) return 'malformed method'
  if (method === 'CONNECT') {
    const authority = splitAuthority(target, null)
    return authority === null ? 'CONNECT needs host:port' : { kind: 'connect', ...authority }
  }
  if (!target.toLowerCase().startsWith('http://')) {
    return target.toLowerCase().startsWith('https://')
      ? 'https:// URLs go through CONNECT (set HTTPS_PROXY)'
      : 'only absolute http:// URLs and CONNECT are proxied'
  }
  const rest = target.slice(7)
  const slash = rest.search(/[/?#]/)
  const authority = splitAuthority(slash < 0 ? rest : rest.slice(0, slash), 80)
  if (authority === null || authority.host.includes('@')) return 'malformed URL authority'
  let path = slash < 0 ? '/' : rest.slice(slash)
  if (path.startsWith('?')) path = `/${path}`
  const hash = path.indexOf('#')
  if (hash >= 0) path = path.slice(0, hash)
  const headers = lines.slice(1).filter(line => {
    const colon = line.indexOf(':')
    return colon > 0 && !HOP_BY_HOP.has(line.slice(0, colon).trim().toLowerCase())
  })
  const out = [`${method} ${path} ${parts[2] ?? 'HTTP/1.1'}`, ...headers, 'Connection: close', '', '']
  return { kind: 'http', ...authority, head: Buffer.from(out.join('\r\n'), 'latin1') }
}

/** A refusal the client shows: status line carries the message too (pip and git print the reason phrase). */
export function refusal (status: number, message: string): Buffer {
  const phrase = message.replace(/[^\x20-\x7e]/g, '?').slice(0, 300)
  const body = `${phrase}\n`
  return Buffer.from(`HTTP/1.1 ${status} ${phrase}\r\nContent-Type: text/plain; charset=utf-8\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nX-Egress-Refused: 1\r\nConnection: close\r\n\r\n${body}`, 'latin1')
}
