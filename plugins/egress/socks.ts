import { formatIp } from './addresses.js'

/*
 * SOCKS5 (RFC 1928) on the proxy's port, told apart from HTTP by its first byte (0x05; an HTTP
 * request starts with a letter). Only what a sandbox needs: no authentication (the source address
 * identifies the chat, as for HTTP), CONNECT to a domain name, an IPv4 or an IPv6 address. BIND and
 * UDP ASSOCIATE are refused with "command not supported". Pure parsing over at most MAX_SOCKS bytes.
 */

export const SOCKS_VERSION = 0x05
/** greeting (2 + 255) + request (4 + 1 + 255 + 2) */
export const MAX_SOCKS = 519

export type SocksParse =
  | { state: 'more' }
  | { state: 'error', message: string, reply: number | null, method?: boolean, host?: string, port?: number }
  | { state: 'done', host: string, port: number, used: number, greetingSize: number, command: number }

/** RFC 1928 section 6 reply codes */
export const REP = { ok: 0x00, failure: 0x01, notAllowed: 0x02, networkUnreachable: 0x03, hostUnreachable: 0x04, refused: 0x05, ttlExpired: 0x06, commandNotSupported: 0x07, addressNotSupported: 0x08 } as const

/** The method-selection answer: no authentication (0x00) when offered, else 0xff (no acceptable method). */
export function methodReply (acceptable: boolean): Buffer {
  return Buffer.from([SOCKS_VERSION, acceptable ? 0x00 : 0xff])
}

/** A reply to a request; the bound address is always 0.0.0.0:0 (clients ignore it for CONNECT). */
export function socksReply (code: number): Buffer {
  return Buffer.from([SOCKS_VERSION, code, 0x00, 0x01, 0, 0, 0, 0, 0, 0])
}

/** Parses the greeting then the request from what arrived so far. */
export function parseSocks (buf: Buffer): SocksParse {
  if (buf.length < 2) return { state: 'more' }
  if (buf[0] !== SOCKS_VERSION) return { state: 'error', message: 'not SOCKS5', reply: null }
  const methods = buf[1] as number
  const greetingSize = 2 + methods
  if (buf.length < greetingSize) return { state: 'more' }
  if (!buf.subarray(2, greetingSize).includes(0x00)) return { state: 'error', message: 'SOCKS5 needs the no-authentication method', reply: null, method: true }
  const req = buf.subarray(greetingSize)
  if (req.length < 5) return { state: 'more' }
  if (req[0] !== SOCKS_VERSION) return { state: 'error', message: 'bad SOCKS5 request version', reply: REP.failure }
  const command = req[1] as number
  const atyp = req[3] as number
  let host: string
  let at: number
  if (atyp === 0x01) {
    if (req.length < 4 + 4 + 2) return { state: 'more' }
    host = Array.from(req.subarray(4, 8)).join('.')
    at = 8
  } else if (atyp === 0x04) {
    if (req.length < 4 + 16 + 2) return { state: 'more' }
    let value = 0n
    for (const byte of req.subarray(4, 20)) value = (value << 8n) | BigInt(byte)
    host = formatIp({ family: 6, value })
    at = 20
  } else if (atyp === 0x03) {
    const len = req[4] as number
    if (req.length < 5 + len + 2) return { state: 'more' }
    host = req.subarray(5, 5 + len).toString('latin1')
    at = 5 + len
    if (len === 0) return { state: 'error', message: 'empty SOCKS5 host name', reply: REP.addressNotSupported }
  } else {
    return { state: 'error', message: 'unknown SOCKS5 address type', reply: REP.addressNotSupported }
  }
  const port = ((req[at] as number) << 8) | (req[at + 1] as number)
  const used = greetingSize + at + 2
  if (command !== 0x01) {
    const name = command === 0x02 ? 'BIND' : command === 0x03 ? 'UDP ASSOCIATE' : `command ${command}`
    return { state: 'error', message: `SOCKS5 ${name} is not supported by the sandbox egress proxy (only CONNECT)`, reply: REP.commandNotSupported, host, port }
  }
  if (port === 0) return { state: 'error', message: 'SOCKS5 port 0', reply: REP.failure }
  return { state: 'done', host, port, used, greetingSize, command }
}
