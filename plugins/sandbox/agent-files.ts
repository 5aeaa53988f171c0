import type { Activity } from './activity.js'
import type { Agents } from './agent-client.js'
import type { AgentConnection } from './agent-connection.js'
import { decodeJson, encodeJson, parseFailure, ProtocolError, T_DATA, T_FILE, T_RESULT } from './agent-protocol.js'
import { armDeadline } from './clock.js'
import type { Recovery } from './recovery.js'
import type { ListeningSocket, SandboxFileKind, SandboxFileOp, SandboxFileResult } from './types.js'

/*
 * File operations through cubicle-agent (sandbox-image/agent/cubicle_files.py): stat, read and atomic
 * write as assistant, and the listening TCP sockets, answered by DATA frames and one RESULT, with no
 * process spawned in the sandbox. The answer is untrusted: the kind must be a known one, numbers are
 * range-checked, a read may not return more than asked and socket records must be well-formed (the
 * stream is closed if they are not), messages are cut. The caller runs the equivalent command when
 * the answer is `undefined` (no agent, a lost stream, a write too big for one frame); a lost write is
 * safe to repeat (it replaces the whole file atomically).
 */

/** The agent reads at most this much per request (cubicle_files.MAX_READ). */
export const AGENT_READ_MAX = 8 * 1024 * 1024
/** The agent accepts frames up to 8 MiB + 16 (cubicle-agent MAX_IN): a write's JSON and data must fit. */
const WRITE_MAX = 8 * 1024 * 1024 - 64 * 1024
const KINDS = new Set<string>(['file', 'dir', 'fifo', 'socket', 'char', 'block'])
/** The agent lists at most this many listening sockets (cubicle_files.MAX_LISTENING). */
export const LISTENING_MAX = 4096
/** A listening socket's record: u8 family (4 or 6), u8 0, u16 port, 16 address bytes (IPv4: the first 4, then zeros). */
export const LISTENING_RECORD = 20

/** An IPv6 address in RFC 5952 notation (`::` for the longest run of zero groups, `::ffff:a.b.c.d` when IPv4-mapped). */
export function formatIPv6 (b: Buffer): string {
  if (b.subarray(0, 10).every(x => x === 0) && b[10] === 0xff && b[11] === 0xff) return `::ffff:${b[12]}.${b[13]}.${b[14]}.${b[15]}`
  const groups = Array.from({ length: 8 }, (_, i) => b.readUInt16BE(i * 2))
  let best = -1
  let bestLen = 1
  for (let i = 0; i < 8;) {
    let j = i
    while (j < 8 && groups[j] === 0) j++
    if (j - i > bestLen) { best = i; bestLen = j - i }
    i = j === i ? i + 1 : j
  }
  const hex = groups.map(g => g.toString(16))
  if (best < 0) return hex.join(':')
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`
}

/** The agent's socket records; anything malformed is a protocol violation. */
export function parseListening (data: Buffer): ListeningSocket[] {
  if (data.length % LISTENING_RECORD !== 0) throw new ProtocolError('listening records of a bad length')
  const out: ListeningSocket[] = []
  for (let at = 0; at < data.length; at += LISTENING_RECORD) {
    const family = data[at]
    const addr = data.subarray(at + 4, at + LISTENING_RECORD)
    if (data[at + 1] !== 0 || (family !== 4 && family !== 6) || (family === 4 && addr.subarray(4).some(x => x !== 0))) {
      throw new ProtocolError('bad listening record')
    }
    out.push({ family, address: family === 4 ? `${addr[0]}.${addr[1]}.${addr[2]}.${addr[3]}` : formatIPv6(addr), port: data.readUInt16BE(at + 2) })
  }
  return out
}

const count = (v: unknown, max: number): number | undefined =>
  Number.isSafeInteger(v) && (v as number) >= 0 && (v as number) <= max ? v as number : undefined

/** The RESULT object as a checked answer (`data` already bounded by the caller). */
export function parseFileResult (v: Record<string, unknown>, data: Buffer): SandboxFileResult {
  const r: SandboxFileResult = { ok: v.ok === true, errno: 0, error: '', data, timedOut: false, cancelled: false }
  if (!r.ok) Object.assign(r, parseFailure(v))
  if (typeof v.kind === 'string') r.kind = (KINDS.has(v.kind) ? v.kind : 'other') as SandboxFileKind
  const size = count(v.size, Number.MAX_SAFE_INTEGER)
  if (size !== undefined) r.size = size
  const mode = count(v.mode, 0o7777)
  if (mode !== undefined) r.mode = mode
  if (typeof v.link === 'boolean') r.link = v.link
  if (typeof v.existed === 'boolean') r.existed = v.existed
  return r
}

function wire (op: SandboxFileOp): { json: Record<string, unknown>, data?: Buffer, cap: number } {
  if (op.op === 'read') {
    const max = Math.max(0, Math.min(Math.floor(op.max), AGENT_READ_MAX))
    return { json: { op: 'read', path: op.path, max, offset: Math.trunc(op.offset ?? 0) }, cap: max }
  }
  if (op.op === 'write') return { json: { op: 'write', path: op.path }, data: op.data, cap: 0 }
  if (op.op === 'listening') {
    const max = Math.max(0, Math.min(Math.floor(op.max), LISTENING_MAX))
    return { json: { op: 'listening', max }, cap: max * LISTENING_RECORD }
  }
  return { json: { op: 'stat', path: op.path }, cap: 0 }
}

/** One FILE request (exported for tests) until its RESULT, a loss (undefined), or the caller's timeout/abort. */
export async function fileRequest (conn: AgentConnection, op: SandboxFileOp, opts: { timeoutMs: number, signal?: AbortSignal }): Promise<SandboxFileResult | undefined> {
  const { json, data, cap } = wire(op)
  return await new Promise<SandboxFileResult | undefined>(resolve => {
    const parts: Buffer[] = []
    let got = 0
    let done = false
    let id = 0
    const end = (r: SandboxFileResult | undefined): void => {
      if (done) return
      done = true
      disarm()
      conn.finish(id)
      resolve(r)
    }
    const stopped = (how: 'timedOut' | 'cancelled'): void => {
      end({ ok: false, errno: 0, error: how === 'timedOut' ? 'timed out' : 'cancelled', data: Buffer.alloc(0), timedOut: how === 'timedOut', cancelled: how === 'cancelled' })
    }
    const disarm = armDeadline(opts.timeoutMs, opts.signal, () => { stopped('timedOut') }, () => { stopped('cancelled') })
    id = conn.request(i => encodeJson(i, T_FILE, json, data), {
      frame: (type, payload) => {
        if (done) return
        if (type === T_DATA) {
          got += payload.length
          if (got > cap) throw new ProtocolError('file data beyond what was asked')
          parts.push(payload)
          return
        }
        if (type === T_RESULT) {
          const v = decodeJson(payload)
          const r = parseFileResult(v, Buffer.concat(parts, got))
          if (op.op === 'listening' && r.ok) {
            r.sockets = parseListening(r.data)
            r.more = v.more === true
            r.data = Buffer.alloc(0)
          }
          end(r)
          return
        }
        throw new ProtocolError(`frame type ${type} in a file operation`)
      },
      lost: () => { end(undefined) }
    })
  })
}

export type FileOp = (chatId: string, op: SandboxFileOp, opts: { timeoutMs: number, signal?: AbortSignal }) => Promise<SandboxFileResult | undefined>

/** SandboxService.fileOp: holds a lease for the call; undefined = run the equivalent command instead. */
export function createFileOp (d: { recovery: Pick<Recovery, 'runningEntry'>, activity: Pick<Activity, 'holdLease'>, agents: Pick<Agents, 'agentFor'> }): FileOp {
  return async (chatId, op, opts) => {
    if (op.op === 'write' && op.data.length > WRITE_MAX) return undefined
    const entry = await d.recovery.runningEntry(chatId)
    const release = d.activity.holdLease(entry)
    try {
      const conn = await d.agents.agentFor(entry)
      if (conn === null) return undefined
      return await fileRequest(conn, op, opts)
    } finally { release() }
  }
}
