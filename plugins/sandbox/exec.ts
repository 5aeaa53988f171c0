import type { Activity } from './activity.js'
import type { AgentExec } from './agent-exec.js'
import type { Entry } from './chats.js'
import type { CoreBase } from './context.js'
import type { EngineFailure } from './engine-types.js'
import { toEnvList } from './env.js'
import { SANDBOX_PUT_FAILED } from './errors.js'
import { collectExec, type RawExecResult } from './exec-collect.js'
import { restartedSince, type Outcome } from './exec-outcome.js'
import type { Kill } from './kill.js'
import { ProcessSocket } from './process-socket.js'
import { notRunning, type Recovery } from './recovery.js'
import { SANDBOX_USER } from './sandbox-spec.js'
import type { Transitions } from './transitions.js'
import type { ExecOptions, ExecResult, SandboxStream, StreamOptions } from './types.js'

/*
 * Reaching into a chat's running sandbox: the collecting exec (through the agent, else the engine:
 * exec-collect.ts, which the ready probe and the kill exec use as it is), putFile and openStream. An exec that finds the sandbox gone or stopped starts it again and runs
 * once more (recovery.ts); one that cannot start because the sandbox is saturated restarts it and
 * runs once more (saturation.ts). The kill path of timeouts is kill.ts.
 */

/** The roles a chat's exec builds on. */
export interface ExecDeps {
  activity: Pick<Activity, 'holdLease'>
  agentExec: Pick<AgentExec, 'agentExec'>
  recovery: Pick<Recovery, 'runningEntry' | 'recoverVanished' | 'recoverUnstarted'>
  kill: Kill
  outcome: Pick<Outcome, 'relieve' | 'checkAlive'>
  transitions: Pick<Transitions, 'execStartError'>
}

/** Reaching into a chat's running sandbox (the contract's exec, putFile, openStream). */
export interface SandboxExec {
  exec: (chatId: string, argv: string[], opts?: ExecOptions) => Promise<ExecResult>
  putFile: (chatId: string, path: string, content: Buffer | string, opts?: { mode?: number, uid?: number, gid?: number }) => Promise<void>
  openStream: (chatId: string, argv: string[], opts?: StreamOptions) => Promise<SandboxStream>
}

export function createExec (base: Pick<CoreBase, 'engine' | 'log' | 'opts' | 'clock' | 'streams'>, d: ExecDeps): SandboxExec {
  const { engine, log, clock, streams } = base
  const { activity, agentExec, recovery, kill, outcome, transitions } = d

  /**
   * Holds one lease for the call. A sandbox found gone or stopped is started again, one that cannot
   * start the process because it is saturated is restarted, and the exec runs once more (so does one
   * whose agent stream was lost before its process existed); a status ≥ 128 or unknown is checked
   * against the container's state.
   */
  async function exec (chatId: string, argv: string[], opts: ExecOptions = {}): Promise<ExecResult> {
    const entry = await recovery.runningEntry(chatId)
    const release = activity.holdLease(entry)
    const t0 = clock.real()
    const timeoutMs = opts.timeoutMs ?? base.opts.commandTimeoutS * 1000
    try {
      // Once more at most: after a start that found the sandbox not running (recover), or a process that never started (retry).
      let recover = true
      let retry = true
      for (;;) {
        let r: RawExecResult
        const at = clock.real()
        const left = Math.max(1000, timeoutMs - (at - t0))
        try {
          // The in-sandbox agent when it can serve the call; docker exec otherwise (agent-exec.ts).
          r = await agentExec.agentExec(entry, argv, { ...opts, timeoutMs: left }) ?? await rawExec(entry, argv, { ...opts, timeoutMs: left })
        } catch (err) {
          if (recover && notRunning(err)) { recover = retry = false; await recovery.recoverVanished(entry); continue }
          throw err
        }
        if (retry && r.notStarted && !r.cancelled && (restartedSince(entry, at) || await outcome.relieve(entry))) { recover = retry = false; continue }
        if (retry && r.unstarted === true && opts.signal?.aborted !== true) {
          // A sandbox still reported running may be dying: the next attempt's start may still recover it.
          retry = false
          const u = await recovery.recoverUnstarted(entry)
          if (u.notice !== undefined) recover = false
          if (u.retry) continue
        }
        const { notStarted, unstarted, ...result } = r
        if (result.exitCode === null || result.exitCode >= 128) await outcome.checkAlive(entry)
        if (result.exitCode !== null && result.exitCode >= 128 && entry.state !== 'running') result.exitCode = null
        return result
      }
    } finally { release() }
  }

  /** A chat's collecting exec over the engine: the kill path (marker), the stall check, recovery's error mapping. */
  async function rawExec (entry: Entry, argv: string[], opts: ExecOptions): Promise<RawExecResult> {
    return await collectExec(base, entry.sandboxId ?? '', argv, opts, true, {
      startError: err => transitions.execStartError(entry, err),
      kill: (execId, user) => kill.terminate(entry, execId, user, opts.killGraceMs),
      onStalled: () => { void outcome.relieve(entry).catch(err => { log.warn({ chat: entry.names.key, err }, 'restarting a saturated sandbox failed') }) }
    })
  }

  /** Writes a file through the archive API (owner and mode as given; default root:root 0644). */
  async function putFile (chatId: string, path: string, content: Buffer | string, opts: { mode?: number, uid?: number, gid?: number } = {}): Promise<void> {
    if (!path.startsWith('/') || path.endsWith('/')) throw new TypeError('putFile needs an absolute file path')
    const entry = await recovery.runningEntry(chatId)
    const data = Buffer.isBuffer(content) ? content : Buffer.from(content, 'utf8')
    await withRecovery(entry, async () => {
      try {
        await engine.putFile(entry.sandboxId ?? '', path, data, opts.mode ?? 0o644, opts.uid ?? 0, opts.gid ?? 0)
      } catch (err) {
        const reason = (err as EngineFailure).reason
        if (reason === 'no-such-path' || reason === 'not-permitted') {
          throw new SANDBOX_PUT_FAILED(path, reason === 'no-such-path' ? 'the parent directory does not exist' : 'not permitted')
        }
        throw transitions.execStartError(entry, err)
      }
    })
  }

  /** Runs `op`; when it finds the sandbox gone or stopped, starts it again (recovery.ts) and runs it once more. */
  async function withRecovery<T> (entry: Entry, op: () => Promise<T>): Promise<T> {
    try {
      return await op()
    } catch (err) {
      if (!notRunning(err)) throw err
      await recovery.recoverVanished(entry)
      return await op()
    }
  }

  /** A long-lived exec with a raw byte stream (terminal TTY, CDP relay). See types.ts. */
  async function openStream (chatId: string, argv: string[], opts: StreamOptions = {}): Promise<SandboxStream> {
    const entry = await recovery.runningEntry(chatId)
    const proc = await withRecovery(entry, async () => {
      try {
        return await engine.exec(entry.sandboxId ?? '', {
          argv, user: opts.user ?? SANDBOX_USER, cwd: opts.cwd ?? '/home/assistant', env: toEnvList(opts.env), stdin: true, tty: opts.tty === true
        })
      } catch (err) { throw transitions.execStartError(entry, err) }
    })
    streams.add(proc)
    const socket = new ProcessSocket(proc)
    socket.once('close', () => { streams.delete(proc) })
    return {
      socket,
      demux: (onStdout, onStderr) => {
        proc.stdout.on('data', onStdout)
        proc.stderr.on('data', (data: Buffer) => onStderr?.(data))
        socket.reading = true
      },
      resize: async (cols, rows) => { await proc.resize(cols, rows) },
      exitCode: async () => (await proc.exit).code,
      close: () => { socket.destroy() }
    }
  }

  return { exec, putFile, openStream }
}
