import { randomBytes } from 'node:crypto'
import { SANDBOX_USER } from './sandbox-spec.js'
import type { EngineFailure, ExecProcess, SandboxDetails } from './engine-types.js'
import { toEnvList } from './env.js'
import { SANDBOX_PUT_FAILED } from './errors.js'
import { holdLease } from './activity.js'
import { outputClosed, ProcessSocket } from './process-socket.js'
import { agentExec } from './agent-exec.js'
import { terminate } from './kill.js'
import { notRunning, recoverVanished, runningEntry } from './recovery.js'
import { eventSince } from './notices.js'
import { armDeadline, changed, execStartError, type Entry, type Registry } from './registry.js'
import { diagnose, memoryNotice, pidsNotice, restartSandbox } from './saturation.js'
import type { ExecOptions, ExecResult, SandboxStream, StreamOptions } from './types.js'

/*
 * Reaching into a running sandbox: collecting execs (exec(), the ready probe, the kill exec),
 * putFile and openStream. An exec that finds the sandbox gone or stopped starts it again and runs
 * once more (recovery.ts); one that cannot start because the sandbox is saturated restarts it and
 * runs once more (saturation.ts). The kill path of timeouts is kill.ts.
 */

/** Result deadline after a SIGTERM (at least SIGKILL + 5 s). */
export const RESULT_GRACE_MS = 10_000
/** How long an exec may show no output before the engine is asked whether its process started (a saturated sandbox). */
export const STALL_MS = 2000
const DEFAULT_MAX_BYTES = 32 * 1024 * 1024

interface Ended { timedOut: boolean, cancelled: boolean, seen: boolean }

/** rawExec's result: `notStarted` when the engine never started the process (e.g. no pid left). */
export type RawExecResult = ExecResult & { notStarted: boolean }

/**
 * Holds one lease for the call. A sandbox found gone or stopped is started again, one that cannot
 * start the process because it is saturated is restarted, and the exec runs once more; a status
 * ≥ 128 or unknown is checked against the container's state.
 */
export async function exec (reg: Registry, chatId: string, argv: string[], opts: ExecOptions = {}): Promise<ExecResult> {
  const entry = await runningEntry(reg, chatId)
  const release = holdLease(reg, entry)
  const t0 = Date.now()
  const timeoutMs = opts.timeoutMs ?? reg.opts.commandTimeoutS * 1000
  try {
    for (let attempt = 0; ; attempt++) {
      let r: RawExecResult
      const at = Date.now()
      const left = Math.max(1000, timeoutMs - (at - t0))
      try {
        // The in-sandbox agent when it can serve the call; docker exec otherwise (agent-exec.ts).
        r = await agentExec(reg, entry, argv, { ...opts, timeoutMs: left }) ?? await rawExec(reg, entry.sandboxId ?? '', argv, { ...opts, timeoutMs: left }, entry)
      } catch (err) {
        if (attempt === 0 && notRunning(err)) { await recoverVanished(reg, entry); continue }
        throw err
      }
      if (attempt === 0 && r.notStarted && !r.cancelled && (restartedSince(entry, at) || await relieve(reg, entry))) continue
      const { notStarted, ...result } = r
      if (result.exitCode === null || result.exitCode >= 128) await checkAlive(reg, entry)
      if (result.exitCode !== null && result.exitCode >= 128 && entry.state !== 'running') result.exitCode = null
      return result
    }
  } finally { release() }
}

/**
 * A process could not start, or fork failures showed: restarts the sandbox when the engine says it
 * is saturated (`confirm`: on two samples). True when restarted.
 */
export async function relieve (reg: Registry, entry: Entry, confirm = false): Promise<boolean> {
  if (entry.restarting !== null) { await entry.restarting; return true }
  const d = await diagnose(reg, entry, { stats: true, confirm })
  if (!d.pidsFull && !d.memoryFull) return false
  await restartSandbox(reg, entry, d.pidsFull ? pidsNotice(reg, d, 'restarted') : memoryNotice(reg, d, 'restarted'))
  return true
}

/** The driver restarted or recreated the sandbox since `at` (a call cut off by it may run again). */
export function restartedSince (entry: Entry, at: number): boolean {
  const n = eventSince(entry, at)
  return n !== undefined && (n.action === 'restarted' || n.action === 'recreated')
}

/** Collecting exec with timeout/abort kill. `entry` enables the kill path (marker) and the stall check; internal probes skip the exit code. */
export async function rawExec (reg: Registry, sandboxId: string, argv: string[], opts: ExecOptions, entry?: Entry, wantExitCode = true): Promise<RawExecResult> {
  const execId = randomBytes(12).toString('hex')
  const user = opts.user ?? SANDBOX_USER
  const env = toEnvList(opts.env, entry === undefined ? undefined : { CUBICLE_EXEC_ID: execId })
  const stdin = opts.stdin === undefined ? undefined : Buffer.isBuffer(opts.stdin) ? opts.stdin : Buffer.from(opts.stdin, 'utf8')
  let proc: ExecProcess
  try {
    // The wait for an exec slot counts toward the call's own timeout and ends with its signal.
    const deadline = Date.now() + (opts.timeoutMs ?? reg.opts.commandTimeoutS * 1000)
    proc = await reg.engine.exec(sandboxId, { argv, user, cwd: opts.cwd ?? '/home/assistant', env, stdin: stdin !== undefined, signal: opts.signal, deadline })
  } catch (err) {
    throw entry === undefined ? err : execStartError(reg, entry, err)
  }
  const out = collector(proc, opts.maxBytes ?? DEFAULT_MAX_BYTES)
  const kill = (): number | null => entry === undefined ? null : terminate(reg, entry, execId, user, opts.killGraceMs)
  // A start that hangs (no pid left): restart the sandbox if saturated; the stream ends with it.
  let stalled = false
  const stall = entry === undefined
    ? undefined
    : (seen: () => boolean) => watchStart(proc, seen, () => {
        stalled = true
        void relieve(reg, entry).catch(err => { reg.log.warn({ chat: entry.names.key, err }, 'restarting a saturated sandbox failed') })
      })
  const ended = await awaitEnd(reg, proc, opts, kill, stdin, stall)
  const exit = await proc.exit
  const notStarted = exit.notStarted || (stalled && !ended.seen)
  const exitCode = wantExitCode && !notStarted ? exit.code : null
  return { exitCode, ...out.result(), timedOut: ended.timedOut, cancelled: ended.cancelled, notStarted }
}

/**
 * A start that hangs: when no output arrived within STALL_MS, asks the engine whether the process
 * exists yet; one that does not (the runtime still tries to start it: no pid or memory left) calls
 * `onStalled`. Returns the disarm function.
 */
export function watchStart (proc: ExecProcess, seen: () => boolean, onStalled: () => void): () => void {
  let off = false
  const timer = setTimeout(() => {
    if (off || seen()) return
    proc.started().then(started => { if (!off && !started) onStalled() }, () => {})
  }, STALL_MS)
  timer.unref()
  return () => { off = true; clearTimeout(timer) }
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

/** Arms a stall check (watchStart) given whether any output was seen; returns its disarm function. */
type StallWatch = (seen: () => boolean) => () => void

/**
 * Waits for the process to end. On timeout or abort `kill()` starts the kill path and returns its
 * SIGKILL delay (the result then comes at the latest RESULT_GRACE_MS later, the process closed), or
 * null to give up at once. `stall` watches for a start that hangs.
 */
async function awaitEnd (reg: Registry, proc: ExecProcess, opts: ExecOptions, kill: () => number | null, stdin?: Buffer, stall?: StallWatch): Promise<Ended> {
  reg.streams.add(proc)
  return await new Promise<Ended>(resolve => {
    let timedOut = false
    let cancelled = false
    let done = false
    let seen = false
    const timers: NodeJS.Timeout[] = []
    let disarm = (): void => {}
    let unwatch = (): void => {}
    const finish = (): void => {
      if (done) return
      done = true
      for (const t of timers) clearTimeout(t)
      disarm()
      unwatch()
      reg.streams.delete(proc)
      proc.close()
      resolve({ timedOut, cancelled, seen })
    }
    const saw = (): void => { seen = true }
    proc.stdout.once('data', saw)
    proc.stderr.once('data', saw)
    void outputClosed(proc).then(finish)
    const terminate = (): void => {
      const grace = kill()
      if (grace === null) { finish(); return }
      timers.push(setTimeout(finish, Math.max(RESULT_GRACE_MS, grace + 5000)))
    }
    disarm = armDeadline(opts.timeoutMs ?? reg.opts.commandTimeoutS * 1000, opts.signal,
      () => { if (!cancelled) { timedOut = true; terminate() } },
      () => { if (!timedOut && !cancelled) { cancelled = true; terminate() } })
    if (stall !== undefined) unwatch = stall(() => seen)
    if (stdin !== undefined && proc.stdin !== null) {
      proc.stdin.on('error', () => {})
      proc.stdin.write(stdin)
      proc.stdin.end()
    }
  })
}

/** After an exec lost its stream: refresh the cached state (one inspect) and return what the engine said. */
export async function checkAlive (reg: Registry, entry: Entry): Promise<SandboxDetails | null | undefined> {
  try {
    const c = await reg.engine.inspect(entry.names.container)
    if (entry.locked === 0 && entry.ensuring === null) {
      const was = entry.state
      entry.state = c === null ? 'absent' : c.running ? 'running' : 'stopped'
      // Running in our cache, not any more, and not by our doing: the next exec starts it again.
      if (was === 'running' && entry.state !== 'running' && !entry.stopping) entry.recoverable = true
      changed(reg, entry)
    }
    return c
  } catch (err) {
    if (entry.locked === 0 && entry.ensuring === null) { entry.state = 'unknown'; changed(reg, entry) }
    reg.log.debug({ err }, 'state check failed')
    return undefined
  }
}

/** Writes a file through the archive API (owner and mode as given; default root:root 0644). */
export async function putFile (reg: Registry, chatId: string, path: string, content: Buffer | string, opts: { mode?: number, uid?: number, gid?: number } = {}): Promise<void> {
  if (!path.startsWith('/') || path.endsWith('/')) throw new TypeError('putFile needs an absolute file path')
  const entry = await runningEntry(reg, chatId)
  const data = Buffer.isBuffer(content) ? content : Buffer.from(content, 'utf8')
  await withRecovery(reg, entry, async () => {
    try {
      await reg.engine.putFile(entry.sandboxId ?? '', path, data, opts.mode ?? 0o644, opts.uid ?? 0, opts.gid ?? 0)
    } catch (err) {
      const reason = (err as EngineFailure).reason
      if (reason === 'no-such-path' || reason === 'not-permitted') {
        throw new SANDBOX_PUT_FAILED(path, reason === 'no-such-path' ? 'the parent directory does not exist' : 'not permitted')
      }
      throw execStartError(reg, entry, err)
    }
  })
}

/** Runs `op`; when it finds the sandbox gone or stopped, starts it again (recovery.ts) and runs it once more. */
async function withRecovery<T> (reg: Registry, entry: Entry, op: () => Promise<T>): Promise<T> {
  try {
    return await op()
  } catch (err) {
    if (!notRunning(err)) throw err
    await recoverVanished(reg, entry)
    return await op()
  }
}

/** A long-lived exec with a raw byte stream (terminal TTY, CDP relay). See types.ts. */
export async function openStream (reg: Registry, chatId: string, argv: string[], opts: StreamOptions = {}): Promise<SandboxStream> {
  const entry = await runningEntry(reg, chatId)
  const proc = await withRecovery(reg, entry, async () => {
    try {
      return await reg.engine.exec(entry.sandboxId ?? '', {
        argv, user: opts.user ?? SANDBOX_USER, cwd: opts.cwd ?? '/home/assistant', env: toEnvList(opts.env), stdin: true, tty: opts.tty === true
      })
    } catch (err) { throw execStartError(reg, entry, err) }
  })
  reg.streams.add(proc)
  const socket = new ProcessSocket(proc)
  socket.once('close', () => { reg.streams.delete(proc) })
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
