/*
 * ttyd's WebSocket framing (surface.md §7.2), pure so it is unit-tested on its own. Every message
 * starts with one ASCII command byte; text and binary frames mean the same (ttyd's client sends
 * UTF-8 text as binary frames).
 */

/** client → server */
export const INPUT = 0x30 // '0' + keyboard bytes
export const RESIZE = 0x31 // '1' + {"columns","rows"}
export const PAUSE = 0x32 // '2'
export const RESUME = 0x33 // '3'
export const JSON_DATA = 0x7b // '{': the first message, {"columns","rows","AuthToken"}

/** server → client */
export const OUTPUT = 0x30 // '0' + terminal bytes
export const SET_TITLE = 0x31 // '1' + window title
export const SET_PREFERENCES = 0x32 // '2' + JSON client preferences

export interface TermSize { columns: number, rows: number }

export const DEFAULT_SIZE: TermSize = { columns: 80, rows: 24 }
export const MAX_COLUMNS = 1000
export const MAX_ROWS = 500
/** A size message longer than this is not a size message. */
const MAX_SIZE_JSON = 1024

export type ClientMessage =
  | { type: 'input', data: Buffer }
  | { type: 'resize', size: TermSize }
  | { type: 'pause' }
  | { type: 'resume' }
  | { type: 'ignored', reason: string }

/**
 * `{"columns":n,"rows":n}` (extra keys such as AuthToken ignored) → a size within 1..MAX, or null
 * when the text is not such an object. Values are rounded and clamped, never trusted.
 */
export function parseSize (text: Buffer): TermSize | null {
  if (text.length > MAX_SIZE_JSON) return null
  let value: unknown
  try { value = JSON.parse(text.toString('utf8')) } catch { return null }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null
  const { columns, rows } = value as Record<string, unknown>
  if (typeof columns !== 'number' || typeof rows !== 'number' || !Number.isFinite(columns) || !Number.isFinite(rows)) return null
  return { columns: clamp(columns, MAX_COLUMNS), rows: clamp(rows, MAX_ROWS) }
}

const clamp = (n: number, max: number): number => Math.min(max, Math.max(1, Math.round(n)))

/** One client message after the first. A JSON message later on counts as a resize. */
export function parseClientMessage (data: Buffer): ClientMessage {
  switch (data[0]) {
    case INPUT: return { type: 'input', data: data.subarray(1) }
    case RESIZE:
    case JSON_DATA: {
      const size = parseSize(data[0] === RESIZE ? data.subarray(1) : data)
      return size === null ? { type: 'ignored', reason: 'malformed resize' } : { type: 'resize', size }
    }
    case PAUSE: return { type: 'pause' }
    case RESUME: return { type: 'resume' }
    default: return { type: 'ignored', reason: data.length === 0 ? 'empty message' : 'unknown command' }
  }
}

/** `command` byte followed by the payload, in one buffer (one WebSocket frame). */
export function frame (command: number, payload: Buffer | string): Buffer {
  const body = typeof payload === 'string' ? Buffer.from(payload, 'utf8') : payload
  const out = Buffer.allocUnsafe(body.length + 1)
  out[0] = command
  body.copy(out, 1)
  return out
}

/**
 * The attach command prints `ESC ] cubicle;<pid>;<starttime> BEL` before it execs tmux, so the
 * server can later detach exactly this tmux client: Docker keeps an exec's process alive when its
 * connection closes. The header is removed from the output before anything reaches a viewer.
 */
const HEADER_PREFIX = Buffer.from('\x1b]cubicle;', 'latin1')
const HEADER = /^\x1b\]cubicle;([1-9][0-9]{0,9});([0-9]{1,20})\x07/
export const HEADER_MAX = 64

export interface ClientIdentity { pid: number, start: string }

export type HeaderResult =
  | { state: 'more' }
  | { state: 'done', identity: ClientIdentity | null, rest: Buffer }

/** Feeds the first output bytes (accumulated by the caller). Anything not shaped like the header passes through untouched. */
export function parseHeader (buf: Buffer): HeaderResult {
  const n = Math.min(buf.length, HEADER_PREFIX.length)
  if (!buf.subarray(0, n).equals(HEADER_PREFIX.subarray(0, n))) return { state: 'done', identity: null, rest: buf }
  const bel = buf.indexOf(0x07)
  if (bel === -1) return buf.length < HEADER_MAX ? { state: 'more' } : { state: 'done', identity: null, rest: buf }
  const m = HEADER.exec(buf.subarray(0, bel + 1).toString('latin1'))
  if (m === null) return { state: 'done', identity: null, rest: buf }
  return { state: 'done', identity: { pid: Number(m[1]), start: m[2] as string }, rest: buf.subarray(bel + 1) }
}

/**
 * argv of one viewer: print the header, then become `tmux -u new-session -A -s main` (attach or
 * create; every viewer shares session main). `$$` survives the exec, and field 22 of
 * /proc/<pid>/stat (the start time) tells a reused pid apart.
 */
export const ATTACH_ARGV = [
  '/bin/sh', '-c',
  'printf "\\033]cubicle;%s;%s\\007" "$$" "$(sed "s/.*) //" /proc/$$/stat | cut -d" " -f20)"; exec tmux -u new-session -A -s main',
  'cubicle-terminal'
]
