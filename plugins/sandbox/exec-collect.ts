import { randomBytes } from 'node:crypto'
import type { CoreBase } from './context.js'
import type { ExecProcess } from './engine-types.js'
import { toEnvList } from './env.js'
import { resultGrace, watchProcess, watchStart } from './exec-watch.js'
import { SANDBOX_USER } from './sandbox-spec.js'
import type { ExecOptions, ExecResult } from './types.js'

/*
 * The collecting exec over the engine (docs/engine.md#the-core-inside): output kept within maxBytes,
 * timeout and abort, a stall check. Probes (ready probe, kill exec) use it as it is; a chat's exec
 * (exec.ts) adds the kill path, the saturation check and the error mapping through `ChatExecHooks`.
 */

const DEFAULT_MAX_BYTES = 32 * 1024 * 1024

/**
 * collectExec's result: `notStarted` when the engine never started the process (e.g. no pid left);
 * `unstarted` when the agent's stream was lost before the process existed (agent-exec.ts), or the engine
 * refused to start it because the sandbox was not running any more (ExecExit.notRunning).
 */
export type RawExecResult = ExecResult & { notStarted: boolean, unstarted?: boolean }

/** What a chat's exec adds to a probe's (exec.ts). */
export interface ChatExecHooks {
  /** an engine failure to start the exec, as the contract's error */
  startError: (err: unknown) => Error
  /** timeout/abort: starts the kill path for the exec's marker, returns the SIGKILL delay (null: give up at once) */
  kill: (execId: string, user: string) => number | null
  /** the process did not start within STALL_MS (no pid or memory left) */
  onStalled: () => void
}

/**
 * Collecting exec with timeout/abort. With `chat`, the process carries the CUBICLE_EXEC_ID marker of the
 * kill path and a start that hangs is reported; `wantExitCode` false for internal probes.
 */
export async function collectExec (base: Pick<CoreBase, 'engine' | 'opts' | 'clock' | 'streams'>, sandboxId: string, argv: string[], opts: ExecOptions,
  wantExitCode: boolean, chat?: ChatExecHooks): Promise<RawExecResult> {
  const execId = randomBytes(12).toString('hex')
  const user = opts.user ?? SANDBOX_USER
  const env = toEnvList(opts.env, chat === undefined ? undefined : { CUBICLE_EXEC_ID: execId })
  const stdin = opts.stdin === undefined ? undefined : Buffer.isBuffer(opts.stdin) ? opts.stdin : Buffer.from(opts.stdin, 'utf8')
  let proc: ExecProcess
  try {
    // The wait for an exec slot counts toward the call's own timeout and ends with its signal.
    const deadline = base.clock.real() + (opts.timeoutMs ?? base.opts.commandTimeoutS * 1000)
    proc = await base.engine.exec(sandboxId, { argv, user, cwd: opts.cwd ?? '/home/assistant', env, stdin: stdin !== undefined, signal: opts.signal, deadline })
  } catch (err) {
    throw chat === undefined ? err : chat.startError(err)
  }
  const out = collector(proc, opts.maxBytes ?? DEFAULT_MAX_BYTES)
  const kill = (): number | null => chat === undefined ? null : chat.kill(execId, user)
  // A start that hangs (no pid left): restart the sandbox if saturated; the stream ends with it.
  let stalled = false
  const stall = chat === undefined
    ? undefined
    : (seen: () => boolean) => watchStart(proc, seen, () => { stalled = true; chat.onStalled() })
  const ended = await watchProcess(base, proc, {
    timeoutMs: opts.timeoutMs ?? base.opts.commandTimeoutS * 1000,
    signal: opts.signal,
    stall,
    stop: () => { const grace = kill(); return grace === null ? null : resultGrace(grace) }
  }, () => {
    if (stdin !== undefined && proc.stdin !== null) {
      proc.stdin.on('error', () => {})
      proc.stdin.write(stdin)
      proc.stdin.end()
    }
  })
  const exit = await proc.exit
  const notStarted = exit.notStarted || (stalled && !ended.seen)
  const exitCode = wantExitCode && !notStarted ? exit.code : null
  return { exitCode, ...out.result(), timedOut: ended.timedOut, cancelled: ended.cancelled, notStarted, ...(exit.notRunning === true ? { unstarted: true } : {}) }
}

/** Keeps at most `maxBytes` of stdout and of stderr; the rest only sets `truncated`. */
function collector (proc: ExecProcess, maxBytes: number): { result: () => { stdout: Buffer, stderr: Buffer, truncated: boolean } } {
  let truncated = false
  const keep = (): { chunks: Buffer[], len: number, push: (data: Buffer) => void } => {
    const k = {
      chunks: [] as Buffer[],
      len: 0,
      push: (data: Buffer): void => {
        if (k.len + data.length <= maxBytes) { k.chunks.push(Buffer.from(data)); k.len += data.length; return }
        const room = maxBytes - k.len
        if (room > 0) { k.chunks.push(Buffer.from(data.subarray(0, room))); k.len += room }
        truncated = true
      }
    }
    return k
  }
  const out = keep()
  const err = keep()
  proc.stdout.on('data', out.push)
  proc.stderr.on('data', err.push)
  return { result: () => ({ stdout: Buffer.concat(out.chunks, out.len), stderr: Buffer.concat(err.chunks, err.len), truncated }) }
}
