/*
 * The wire format of cubicle-agent (sandbox-image/agent/cubicle-agent.py), pure and unit-tested.
 * Frame: u32 length (big-endian, of what follows) | u32 request id | u8 type | payload. JSON payloads
 * are u32 length, the JSON text, then raw bytes (a file write's content). Everything the agent sends is
 * untrusted: the parser accepts only the agent's frame types, caps every frame, parses JSON only up to
 * a small cap and never accumulates more than one frame; any violation ends the stream for good.
 */

/** Server → agent. */
export const T_EXEC = 16
export const T_STDIN = 17
export const T_STDIN_END = 18
export const T_CLOSE = 19
export const T_FILE = 20
/** A TCP connection to the sandbox's loopback (agent-connect.ts): JSON { port, window }. */
export const T_CONNECT = 21
/** Bytes of a connection's output the server consumed (u32): the agent may send that much more. */
export const T_ACK = 22

/** Agent → server. */
export const T_HELLO = 1
export const T_OUT = 2
export const T_ERR = 3
export const T_EXIT = 4
export const T_FAIL = 5
export const T_RESULT = 6
export const T_DATA = 7
/** A CONNECT succeeded: JSON { family: 4 | 6 }. */
export const T_CONNECTED = 8
/** Bytes of a connection's input the agent wrote to the app (u32): the server may send that much more. */
export const T_CREDIT = 9
/**
 * An EXEC's process exists (empty payload), before any of its output; sent by agents whose HELLO says
 * `spawned: true`. A stream lost before it means the command never started (agent-exec.ts).
 */
export const T_SPAWNED = 10

export const PROTOCOL_VERSION = 1
/** The agent sends output and file data in chunks of at most 256 KiB (fewer frames: 64 KiB ran at a third of the speed through the engine's copy). */
export const CHUNK = 256 * 1024
/** Largest payload accepted from the agent (a chunk plus room); larger ends the stream. */
export const MAX_FRAME = CHUNK + 1024
/** Largest JSON text accepted inside a frame. */
export const MAX_JSON = 16 * 1024
const HEADER = 9

export class ProtocolError extends Error { override name = 'ProtocolError' }

export function encodeFrame (id: number, type: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.allocUnsafe(HEADER)
  head.writeUInt32BE(payload.length + 5, 0)
  head.writeUInt32BE(id >>> 0, 4)
  head.writeUInt8(type, 8)
  return Buffer.concat([head, payload])
}

export function encodeJson (id: number, type: number, value: unknown, data?: Buffer): Buffer {
  const text = Buffer.from(JSON.stringify(value), 'utf8')
  const len = Buffer.allocUnsafe(4)
  len.writeUInt32BE(text.length, 0)
  return encodeFrame(id, type, Buffer.concat(data === undefined ? [len, text] : [len, text, data]))
}

/** A JSON payload as an object (never an array or scalar). Throws ProtocolError otherwise. */
export function decodeJson (payload: Buffer): Record<string, unknown> {
  if (payload.length < 4) throw new ProtocolError('short JSON payload')
  const n = payload.readUInt32BE(0)
  if (n > MAX_JSON || n + 4 > payload.length) throw new ProtocolError('bad JSON length')
  let v: unknown
  try { v = JSON.parse(payload.subarray(4, 4 + n).toString('utf8')) } catch { throw new ProtocolError('bad JSON') }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ProtocolError('JSON payload is not an object')
  return v as Record<string, unknown>
}

const AGENT_TYPES = new Set([T_HELLO, T_OUT, T_ERR, T_EXIT, T_FAIL, T_RESULT, T_DATA, T_CONNECTED, T_CREDIT, T_SPAWNED])

/**
 * Incremental parser of the agent's frames. Holds at most one partial frame (≤ MAX_FRAME + 9 bytes,
 * gathered as slices, so a frame announced but never sent costs only what arrived). After the
 * first violation it reports once through onError and ignores everything that follows.
 */
export class FrameParser {
  private head = Buffer.alloc(HEADER)
  private headLen = 0
  private parts: Buffer[] = []
  private need = 0
  private id = 0
  private type = 0
  failed = false

  constructor (private readonly onFrame: (id: number, type: number, payload: Buffer) => void,
    private readonly onError: (reason: string) => void) {}

  push (chunk: Buffer): void {
    let off = 0
    while (off < chunk.length && !this.failed) {
      if (this.headLen < HEADER) {
        const take = Math.min(HEADER - this.headLen, chunk.length - off)
        chunk.copy(this.head, this.headLen, off, off + take)
        this.headLen += take
        off += take
        if (this.headLen < HEADER) return
        const length = this.head.readUInt32BE(0)
        this.id = this.head.readUInt32BE(4)
        this.type = this.head.readUInt8(8)
        if (length < 5 || length - 5 > MAX_FRAME) { this.fail(`frame length ${length}`); return }
        if (!AGENT_TYPES.has(this.type)) { this.fail(`frame type ${this.type}`); return }
        this.need = length - 5
        if (this.need === 0) this.deliver()
        continue
      }
      const take = Math.min(this.need, chunk.length - off)
      this.parts.push(chunk.subarray(off, off + take))
      this.need -= take
      off += take
      if (this.need === 0) this.deliver()
    }
  }

  /** The stream ended: a partial frame is a violation (reported), a clean end is not. */
  end (): void {
    if (!this.failed && (this.headLen > 0 || this.parts.length > 0)) this.fail('stream ended inside a frame')
  }

  private deliver (): void {
    const payload = this.parts.length === 1 ? Buffer.from(this.parts[0] as Buffer) : Buffer.concat(this.parts)
    this.parts = []
    this.headLen = 0
    this.onFrame(this.id, this.type, payload)
  }

  private fail (reason: string): void {
    this.failed = true
    this.parts = []
    this.onError(reason)
  }
}

/** What an EXIT says: the code, the pids hint, and the listening sockets' records when the EXEC asked for them. */
export interface ExitInfo {
  code: number | null
  pids?: number
  /** the records after the JSON (agent-files.ts parseListening); `more` when the agent left some out */
  listening?: { more: boolean, records: Buffer }
}

/**
 * An EXIT payload: code 0–255 or null (the process was not waited for); pids a hint; `listening` (an object
 * with `more`) says the bytes after the JSON are listening socket records, else those bytes must be absent.
 */
export function parseExit (payload: Buffer): ExitInfo {
  const v = decodeJson(payload)
  const code = v.code
  if (code !== null && !(Number.isInteger(code) && (code as number) >= 0 && (code as number) <= 255)) throw new ProtocolError('bad exit code')
  const pids = v.pids
  const out: ExitInfo = Number.isInteger(pids) && (pids as number) >= 0 && (pids as number) < 1e9 ? { code: code as number | null, pids: pids as number } : { code: code as number | null }
  const rest = payload.subarray(4 + payload.readUInt32BE(0))
  const listed = v.listening
  if (listed === undefined) {
    if (rest.length > 0) throw new ProtocolError('bytes after an EXIT without listening')
    return out
  }
  if (typeof listed !== 'object' || listed === null || typeof (listed as { more?: unknown }).more !== 'boolean') throw new ProtocolError('bad listening in EXIT')
  return { ...out, listening: { more: (listed as { more: boolean }).more, records: rest } }
}

/** A FAIL or failed RESULT: the errno (0–4095) and a message cut to 300 characters. */
export function parseFailure (v: Record<string, unknown>): { errno: number, error: string } {
  const errno = Number.isInteger(v.errno) && (v.errno as number) >= 0 && (v.errno as number) < 4096 ? v.errno as number : 0
  const error = typeof v.error === 'string' ? v.error.slice(0, 300) : 'unknown error'
  return { errno, error }
}
