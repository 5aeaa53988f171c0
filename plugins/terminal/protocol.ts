/*
 * ttyd's WebSocket framing (docs/contract.md#terminal), pure so it is unit-tested on its own. Every message
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
 * argv of one viewer: `tmux -u new-session -A -s main` (attach, or create session main; every
 * viewer shares it). The exec's environment carries CUBICLE_VIEWER=<random id>, so the server can
 * later detach exactly this tmux client: Docker keeps an exec's process running after its
 * connection closes.
 */
export const ATTACH_ARGV = ['tmux', '-u', 'new-session', '-A', '-s', 'main']
export const VIEWER_ENV = 'CUBICLE_VIEWER'

/**
 * SIGHUP (tmux: "[lost tty]", a clean detach) to the processes carrying the viewer's id that docker
 * exec started (parent pid 0). The tmux server and the shells of the session may carry the id too
 * (they inherit the environment of the client that started them), but never have parent pid 0.
 */
const DETACH_SCRIPT = `
for p in $(grep -lzx "${VIEWER_ENV}=$1" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do
  [ "$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f2)" = 0 ] && kill -HUP "$p" 2>/dev/null
done
echo done
`

export function detachArgv (viewerId: string): string[] {
  if (!/^[0-9a-f]{16,64}$/.test(viewerId)) throw new TypeError('viewer id must be hex')
  return ['/bin/sh', '-c', DETACH_SCRIPT, 'cubicle-detach', viewerId]
}
