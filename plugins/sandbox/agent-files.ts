import type { Activity } from './activity.js'
import type { Agents } from './agent-client.js'
import type { AgentConnection } from './agent-connection.js'
import { decodeJson, encodeJson, parseFailure, ProtocolError, T_DATA, T_FILE, T_RESULT } from './agent-protocol.js'
import { armDeadline } from './clock.js'
import type { Recovery } from './recovery.js'
import type { SandboxFileKind, SandboxFileOp, SandboxFileResult } from './types.js'

/*
 * File operations through cubicle-agent (sandbox-image/agent/cubicle_files.py): stat, read and atomic
 * write as assistant, answered by DATA frames and one RESULT, with no process spawned in the sandbox.
 * The answer is untrusted: the kind must be a known one, numbers are range-checked, a read may not
 * return more than asked (the stream is closed if it tries), messages are cut. The caller runs the
 * equivalent command when the answer is `undefined` (no agent, a lost stream, a write too big for one
 * frame); a lost write is safe to repeat (it replaces the whole file atomically).
 */

/** The agent reads at most this much per request (cubicle_files.MAX_READ). */
export const AGENT_READ_MAX = 8 * 1024 * 1024
/** The agent accepts frames up to 8 MiB + 16 (cubicle-agent MAX_IN): a write's JSON and data must fit. */
const WRITE_MAX = 8 * 1024 * 1024 - 64 * 1024
const KINDS = new Set<string>(['file', 'dir', 'fifo', 'socket', 'char', 'block'])

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
        if (type === T_RESULT) { end(parseFileResult(decodeJson(payload), Buffer.concat(parts, got))); return }
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
