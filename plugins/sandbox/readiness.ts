import type { ChatPaths } from '../../core/chat-paths.js'
import { chownOutputs } from './data-dirs.js'
import type { EngineFailure } from './engine-types.js'
import { SANDBOX_FAILED } from './errors.js'
import { rawExec, type RawExecResult } from './exec.js'
import { SANDBOX_USER } from './sandbox-spec.js'
import { sleep, type Entry, type Registry } from './registry.js'

/*
 * Readiness of a started sandbox (lifecycle.ts for a chat's, pool.ts for a warm pool's): one probe
 * exec as the sandbox user that also removes a stale opencode auth.json and reports the uid/gid the
 * outputs directory is given to.
 */

const AUTH_JSON = '/home/assistant/.local/share/opencode/auth.json'
const READY_PROBE = ['/bin/sh', '-c', `rm -f ${AUTH_JSON} 2>/dev/null; id -u; id -g`]

export interface SandboxIds { uid: number, gid: number }

async function runProbe (reg: Registry, sandboxId: string): Promise<{ r: RawExecResult, ids: SandboxIds | null }> {
  const r = await rawExec(reg, sandboxId, READY_PROBE, { user: SANDBOX_USER, timeoutMs: 5000 }, undefined, false)
  const [uid, gid] = r.stdout.toString('utf8').trim().split('\n').map(Number)
  return { r, ids: uid !== undefined && gid !== undefined && Number.isInteger(uid) && Number.isInteger(gid) ? { uid, gid } : null }
}

/**
 * Ready when an exec succeeds (≤ readyTimeoutMs of the engine's answers: time an attempt spent on a
 * busy engine is added back, up to the create timeout).
 */
export async function waitReady (reg: Registry, entry: Entry): Promise<SandboxIds | null> {
  let deadline = Date.now() + reg.opts.readyTimeoutMs
  const cap = Date.now() + Math.max(reg.opts.readyTimeoutMs, reg.opts.createTimeoutS * 1000)
  let lastError: unknown
  while (true) {
    const at = Date.now()
    try {
      const { r, ids } = await runProbe(reg, entry.sandboxId ?? '')
      if (ids !== null) return ids
      if (r.exitCode === 0) return null
      lastError = new Error(`ready probe exited with ${String(r.exitCode)}${r.timedOut ? ' (timed out)' : ''}`)
      // A probe that ran out of time on a loaded engine is slow, not failed.
      if (r.timedOut) deadline = Math.min(cap, deadline + (Date.now() - at))
    } catch (err) {
      const e = err as EngineFailure
      if (e.unavailable) throw err
      // A busy engine says nothing about the sandbox: keep trying up to the cap, then report busy.
      if (e.busy) deadline = Math.min(cap, Math.max(deadline + (Date.now() - at), Date.now() + 200))
      lastError = err
    }
    if (Date.now() >= deadline) {
      if ((lastError as EngineFailure | undefined)?.busy === true) throw lastError
      reg.log.error({ chat: entry.names.key, err: lastError }, 'sandbox did not become ready')
      throw new SANDBOX_FAILED('it did not become ready')
    }
    await sleep(100)
  }
}

/** A warm pool sandbox's probe: the ids it reports, retried for readyTimeoutMs (no chat to report to). */
export async function probePoolSandbox (reg: Registry, id: string): Promise<SandboxIds> {
  const deadline = Date.now() + reg.opts.readyTimeoutMs
  while (true) {
    try {
      const { ids } = await runProbe(reg, id)
      if (ids !== null) return ids
    } catch (err) {
      if ((err as { unavailable?: boolean }).unavailable === true || Date.now() >= deadline) throw err
    }
    if (Date.now() >= deadline) throw new Error('pool sandbox did not become ready')
    await sleep(100)
  }
}

/** Gives the chat's outputs directories to the sandbox user (SANDBOX_UID/GID, else what the probe reported). */
export async function fixOwnership (reg: Registry, paths: ChatPaths, ids: SandboxIds | null): Promise<void> {
  const uid = reg.opts.uid > 0 ? reg.opts.uid : ids?.uid
  const gid = reg.opts.gid > 0 ? reg.opts.gid : ids?.gid
  if (uid === undefined || gid === undefined) return
  const ok = await chownOutputs(paths, uid, gid)
  if (!ok && !reg.ownerWarned) {
    reg.ownerWarned = true
    reg.log.warn({ uid, gid }, 'cannot give outputs directories to the sandbox user (the server is not root): set SANDBOX_UID/SANDBOX_GID to the server user or run the server as root')
  }
}
