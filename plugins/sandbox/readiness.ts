import { agentOf, type Agents } from './agent-client.js'
import { agentRequest } from './agent-exec.js'
import { T_OUT } from './agent-protocol.js'
import type { EngineFailure, StorageOwner } from './engine-types.js'
import { SANDBOX_FAILED } from './errors.js'
import { collectExec, type RawExecResult } from './exec-collect.js'
import { SANDBOX_USER } from './sandbox-spec.js'
import type { Entry } from './chats.js'
import { sleep } from './clock.js'
import type { CoreBase } from './context.js'

/*
 * Readiness of a started sandbox (lifecycle.ts for a chat's, pool.ts for a warm pool's): one probe
 * as the sandbox user that also removes a stale opencode auth.json and reports the uid/gid the
 * outputs directory is given to. A chat's sandbox is ready when its in-sandbox agent answers the probe
 * (docs/contract.md#creation; lifecycle opens the agent at the start anyway): no engine exec, which
 * cost a new chat 80-130 ms and a wait for dockerd (docs/performance.md); else an exec of the probe.
 */

const AUTH_JSON = '/home/assistant/.local/share/opencode/auth.json'
const READY_PROBE = ['/bin/sh', '-c', `rm -f ${AUTH_JSON} 2>/dev/null; id -u; id -g`]
/** The probe through an agent whose HELLO said its ids: one process instead of four (sh, rm, id, id) on a new chat's first call. */
const READY_RM = ['rm', '-f', AUTH_JSON]
const PROBE_TIMEOUT_MS = 5000
/** The probe prints two numbers: more is cut. */
const PROBE_MAX_BYTES = 1024

function parseIds (text: string): SandboxIds | null {
  const [uid, gid] = text.trim().split('\n').map(Number)
  return uid !== undefined && gid !== undefined && Number.isInteger(uid) && Number.isInteger(gid) ? { uid, gid } : null
}

export interface SandboxIds { uid: number, gid: number }

/** The ready probe of chats' and pool sandboxes, and the outputs directory given to the sandbox user. */
export interface Readiness {
  waitReady: (entry: Entry) => Promise<SandboxIds | null>
  probePoolSandbox: (id: string) => Promise<SandboxIds>
  /** Gives the outputs of `data` (a chat's key or a pool slot) to the sandbox user, where the engine's storage needs it (engine.giveOutputs). */
  fixOwnership: (data: StorageOwner, ids: SandboxIds | null) => Promise<void>
}

export function createReadiness (base: Pick<CoreBase, 'engine' | 'log' | 'opts' | 'clock' | 'streams'>, agents: Pick<Agents, 'openAgent'>): Readiness {
  const { log, opts, clock } = base
  let ownerWarned = false

  async function runProbe (sandboxId: string): Promise<{ r: RawExecResult, ids: SandboxIds | null }> {
    const r = await collectExec(base, sandboxId, READY_PROBE, { user: SANDBOX_USER, timeoutMs: PROBE_TIMEOUT_MS }, false)
    return { r, ids: parseIds(r.stdout.toString('utf8')) }
  }

  /**
   * The probe through the chat's agent: its ids (null: none printed), or undefined when the agent cannot answer now.
   * An agent that said its ids in its HELLO only removes the stale file (its exit status is ignored, as the probe's `rm`'s is).
   */
  async function agentProbe (entry: Entry, sandboxId: string): Promise<SandboxIds | null | undefined> {
    const conn = await agents.openAgent(agentOf(entry, sandboxId))
    if (conn === null) return undefined
    const said = conn.ids
    const out: Buffer[] = []
    let len = 0
    const r = await agentRequest(log, entry.names.key, conn, {
      argv: said === undefined ? READY_PROBE : READY_RM,
      env: {},
      merged: false,
      cwd: '/',
      timeoutMs: PROBE_TIMEOUT_MS,
      onData: (type, data) => {
        if (type !== T_OUT || len >= PROBE_MAX_BYTES) return
        out.push(data.subarray(0, PROBE_MAX_BYTES - len))
        len += Math.min(data.length, PROBE_MAX_BYTES - len)
      }
    }, () => null)
    if (said !== undefined) return typeof r.code === 'number' ? said : undefined
    return r.code === 0 ? parseIds(Buffer.concat(out).toString('utf8')) : undefined
  }

  /**
   * Ready when the agent answers the probe, else when an exec of it succeeds (≤ readyTimeoutMs of the engine's answers: time an attempt spent on a
   * busy engine is added back, up to the create timeout).
   */
  async function waitReady (entry: Entry): Promise<SandboxIds | null> {
    const viaAgent = entry.sandboxId === undefined ? undefined : await agentProbe(entry, entry.sandboxId)
    if (viaAgent !== undefined) return viaAgent
    let deadline = clock.real() + opts.readyTimeoutMs
    const cap = clock.real() + Math.max(opts.readyTimeoutMs, opts.createTimeoutS * 1000)
    let lastError: unknown
    while (true) {
      const at = clock.real()
      try {
        const { r, ids } = await runProbe(entry.sandboxId ?? '')
        if (ids !== null) return ids
        if (r.exitCode === 0) return null
        lastError = new Error(`ready probe exited with ${String(r.exitCode)}${r.timedOut ? ' (timed out)' : ''}`)
        // A probe that ran out of time on a loaded engine is slow, not failed.
        if (r.timedOut) deadline = Math.min(cap, deadline + (clock.real() - at))
      } catch (err) {
        const e = err as EngineFailure
        if (e.unavailable) throw err
        // A busy engine says nothing about the sandbox: keep trying up to the cap, then report busy.
        if (e.busy) deadline = Math.min(cap, Math.max(deadline + (clock.real() - at), clock.real() + 200))
        lastError = err
      }
      if (clock.real() >= deadline) {
        if ((lastError as EngineFailure | undefined)?.busy === true) throw lastError
        log.error({ chat: entry.names.key, err: lastError }, 'sandbox did not become ready')
        throw new SANDBOX_FAILED('it did not become ready')
      }
      await sleep(100)
    }
  }

  /** A warm pool sandbox's probe: the ids it reports, retried for readyTimeoutMs (no chat to report to). */
  async function probePoolSandbox (id: string): Promise<SandboxIds> {
    const deadline = clock.real() + opts.readyTimeoutMs
    while (true) {
      try {
        const { ids } = await runProbe(id)
        if (ids !== null) return ids
      } catch (err) {
        if ((err as { unavailable?: boolean }).unavailable === true || clock.real() >= deadline) throw err
      }
      if (clock.real() >= deadline) throw new Error('pool sandbox did not become ready')
      await sleep(100)
    }
  }

  /**
   * Gives the outputs directory to the sandbox user (SANDBOX_UID/GID, else what the probe reported) through the
   * engine, whose storage it is (Docker: a bind mount's source on the host); an engine without giveOutputs needs nothing.
   */
  async function fixOwnership (data: StorageOwner, ids: SandboxIds | null): Promise<void> {
    const uid = opts.uid > 0 ? opts.uid : ids?.uid
    const gid = opts.gid > 0 ? opts.gid : ids?.gid
    if (uid === undefined || gid === undefined || base.engine.giveOutputs === undefined) return
    const ok = await base.engine.giveOutputs(data, { uid, gid })
    if (!ok && !ownerWarned) {
      ownerWarned = true
      log.warn({ uid, gid }, 'cannot give outputs directories to the sandbox user (the server is not root): set SANDBOX_UID/SANDBOX_GID to the server user or run the server as root')
    }
  }

  return { waitReady, probePoolSandbox, fixOwnership }
}
