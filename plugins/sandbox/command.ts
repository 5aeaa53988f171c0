import { randomBytes } from 'node:crypto'
import { holdLease } from './activity.js'
import { agentCommand } from './agent-exec.js'
import { SANDBOX_USER } from './sandbox-spec.js'
import { pokeDiskWatchdog } from './disk-watchdog.js'
import { outputClosed } from './process-socket.js'
import type { ExecProcess } from './engine-types.js'
import { toEnvList } from './env.js'
import { checkAlive, relieve, restartedSince, RESULT_GRACE_MS, watchStart } from './exec.js'
import { commandArgv, EofFilter, SentinelParser } from './exec-stream.js'
import { terminate } from './kill.js'
import { eventSince, takeNotices } from './notices.js'
import { notRunning, recoverVanished, runningEntry } from './recovery.js'
import { armDeadline, execStartError, sleep, type Entry, type Registry } from './registry.js'
import { diagnose, memoryNotice, pidsNotice, pidsSuspicious, restartSandbox } from './saturation.js'
import type { CommandOptions, CommandResult, SandboxNotice } from './types.js'

/*
 * runCommand(), the bash_tool path (docs/contract.md#bash_tool): `bash -c` inside a wrapper that reports bash's
 * status on stderr and marks the end of its output on stdout (exec-stream.ts), so the call returns as
 * soon as bash exits and its output is in, even while background children hold stdout open. A
 * sandbox found gone is started again and the command runs once more (recovery.ts); one found
 * saturated is restarted (saturation.ts), and the command runs once more when it never started.
 */

const DRAIN_MS = 1000
const QUIET_MS = 200

interface Watched extends CommandResult {
  sentinel: boolean
  /** any byte arrived on the exec's stream */
  seen: boolean
  /** process count the wrapper read after bash exited (a hint) */
  pids: number | undefined
  /** the output shows fork failures (EAGAIN) or SIGKILLed jobs: worth asking the engine */
  forkErrors: boolean
  killedJobs: boolean
  /** the only output is the wrapper's own fork failure (bash never started) */
  cannotFork: boolean
}

export async function runCommand (reg: Registry, chatId: string, command: string, opts: CommandOptions): Promise<CommandResult> {
  const entry = await runningEntry(reg, chatId)
  const release = holdLease(reg, entry)
  const own: SandboxNotice[] = []
  try {
    const result = await attempt(reg, entry, command, opts, own, Date.now(), true)
    const notices = takeNotices(entry, own)
    return notices.length > 0 ? { ...result, notices } : result
  } finally {
    release()
    pokeDiskWatchdog(reg, entry)
  }
}

async function attempt (reg: Registry, entry: Entry, command: string, opts: CommandOptions, own: SandboxNotice[], t0: number, first: boolean): Promise<CommandResult> {
  const at = Date.now()
  const again = async (): Promise<CommandResult> => { opts.onReset?.(); return await attempt(reg, entry, command, opts, own, t0, false) }
  // The in-sandbox agent when it can serve the call; docker exec otherwise (agent-exec.ts).
  const viaAgent = await agentCommand(reg, entry, command, opts, own, t0)
  if (viaAgent !== undefined) return viaAgent
  const execId = randomBytes(12).toString('hex')
  const env = toEnvList(opts.env, { PAGER: 'cat', GIT_PAGER: 'cat', DEBIAN_FRONTEND: 'noninteractive', CUBICLE_EXEC_ID: execId })
  let proc: ExecProcess
  try {
    // The wait for an exec slot counts toward the command's timeout and ends with its signal.
    proc = await reg.engine.exec(entry.sandboxId ?? '', { argv: commandArgv(command), user: SANDBOX_USER, cwd: '/home/assistant', env, signal: opts.signal, deadline: t0 + opts.timeoutMs })
  } catch (err) {
    const e = execStartError(reg, entry, err)
    if (!first || !notRunning(e)) throw e
    const notice = await recoverVanished(reg, entry)
    if (notice !== undefined) own.push(notice)
    return await again()
  }
  // A start that hangs, or fork failures in the output: ask the engine at once, and restart a
  // saturated sandbox while the command is still running (the restart ends its stream).
  let stalled = false
  let relieving: Promise<boolean> | undefined
  const relieveNow = (confirm: boolean): void => {
    relieving ??= relieve(reg, entry, confirm).catch(err => {
      reg.log.warn({ chat: entry.names.key, err }, 'restarting a saturated sandbox failed')
      return false
    })
  }
  const w = await watchCommand(reg, proc, { ...opts, timeoutMs: Math.max(1000, opts.timeoutMs - (at - t0)) },
    () => terminate(reg, entry, execId, SANDBOX_USER, opts.killGraceMs),
    seen => watchStart(proc, seen, () => { stalled = true; relieveNow(false) }),
    () => { relieveNow(true) })
  const relieved = relieving !== undefined && await relieving
  const result: CommandResult = { exitCode: w.exitCode, timedOut: w.timedOut, cancelled: w.cancelled }
  const retry = first && opts.signal?.aborted !== true
  if (w.sentinel || w.timedOut || w.cancelled) {
    // The wrapper could not even fork bash: nothing of the command ran.
    if (retry && w.cannotFork && w.exitCode === 2 && (relieved || restartedSince(entry, at) || await relieve(reg, entry))) return await again()
    await afterExit(reg, entry, w, at, own, relieved || restartedSince(entry, at))
    return result
  }
  // The stream ended without bash's status: the process never started, or the sandbox went away.
  // (Its only output the wrapper's own fork failure: bash never ran either.)
  const notStarted = (await proc.exit).notStarted || (stalled && !w.seen) || w.cannotFork
  if (retry && notStarted && (relieved || restartedSince(entry, at) || await relieve(reg, entry))) return await again()
  await explainLoss(reg, entry, at, own)
  return result
}

/**
 * bash exited (or was timed out): ask the engine when the output or the wrapper's hint suggests
 * saturation (unless the sandbox was restarted during the call already) or OOM kills.
 */
export async function afterExit (reg: Registry, entry: Entry, w: Pick<Watched, 'forkErrors' | 'pids' | 'killedJobs' | 'exitCode'>, at: number, own: SandboxNotice[], restarted: boolean): Promise<void> {
  const suspicious = !restarted && (w.forkErrors || pidsSuspicious(w.pids, reg.opts.pidsLimit))
  const killed = w.killedJobs || (w.exitCode !== null && w.exitCode >= 128)
  if (!suspicious && !killed) return
  const d = await diagnose(reg, entry, { stats: suspicious, oomSince: killed ? at : undefined, confirm: true })
  if (d.oomKills > 0) own.push(memoryNotice(reg, d, 'none'))
  if (d.pidsFull) await restartFor(reg, entry, pidsNotice(reg, d, 'restarted'), own)
}

/** Why a command lost its stream: a driver action, the sandbox stopped or removed outside, or saturation. */
export async function explainLoss (reg: Registry, entry: Entry, at: number, own: SandboxNotice[]): Promise<void> {
  let c = await checkAlive(reg, entry)
  // The engine may still report a killed container as running for a moment after its streams closed.
  for (let i = 0; i < 3 && c?.running === true; i++) {
    await sleep(250)
    c = await checkAlive(reg, entry)
  }
  const ours = eventSince(entry, at)
  if (ours !== undefined) { own.unshift(ours); return }
  if (c === undefined) return
  if (c === null || !c.running) {
    // checkAlive marks a change it did not expect (not stop(), not a driver action) as recoverable.
    const by = entry.recoverable ? 'outside' : 'server'
    own.unshift(c?.oomKilled === true ? memoryNotice(reg, null, 'stopped') : { kind: 'sandbox-stopped', action: 'stopped', removed: c === null, by })
    return
  }
  const d = await diagnose(reg, entry, { stats: true, oomSince: at })
  if (d.pidsFull) await restartFor(reg, entry, pidsNotice(reg, d, 'restarted'), own, true)
  else own.unshift(d.oomKills > 0 ? memoryNotice(reg, d, 'none') : { kind: 'stream-lost', action: 'none' })
}

/** Restarts a saturated sandbox; `notice` goes first in the result when it explains a lost command. */
async function restartFor (reg: Registry, entry: Entry, notice: SandboxNotice, own: SandboxNotice[], cause = false): Promise<void> {
  if (cause) own.unshift(notice)
  else own.push(notice)
  try {
    await restartSandbox(reg, entry, notice)
  } catch (err) {
    // Killed but not started again: the next call starts it (the chat is marked recoverable).
    notice.action = 'stopped'
    reg.log.warn({ chat: entry.names.key, err }, 'restarting a saturated sandbox failed')
  }
}

/** Streams the command's output until bash's status arrived and the output went quiet, or until timeout/abort. */
async function watchCommand (reg: Registry, proc: ExecProcess, opts: CommandOptions, kill: () => number, stall: (seen: () => boolean) => () => void,
  onForkErrors: () => void): Promise<Watched> {
  reg.streams.add(proc)
  return await new Promise<Watched>(resolve => {
    let timedOut = false
    let cancelled = false
    let done = false
    let seen = false
    let exitCode: number | null = null
    const timers: NodeJS.Timeout[] = []
    let quiet: NodeJS.Timeout | undefined
    let disarm = (): void => {}
    let unwatch = (): void => {}
    const finish = (): void => {
      if (done) return
      done = true
      for (const t of timers) clearTimeout(t)
      clearTimeout(quiet)
      disarm()
      unwatch()
      output.end()
      reg.streams.delete(proc)
      proc.close()
      resolve({
        exitCode,
        timedOut,
        cancelled,
        sentinel: output.exited(),
        seen,
        pids: output.pids(),
        forkErrors: output.hints.fork,
        killedJobs: output.hints.killed,
        cannotFork: output.cannotFork()
      })
    }
    // Once bash's status and the end of its output are both in, wait for QUIET_MS without output
    // (background children may still print), then return even if they hold the output open.
    const settle = (): void => {
      if (!output.settled()) return
      clearTimeout(quiet)
      quiet = setTimeout(finish, QUIET_MS)
    }
    const output = mergedOutput(reg, opts.onOutput, onForkErrors, settle, code => {
      if (timedOut || cancelled) return
      exitCode = code
      // bash has exited: return within DRAIN_MS whatever is still in flight.
      timers.push(setTimeout(finish, DRAIN_MS))
      settle()
    })
    proc.stdout.on('data', (c: Buffer) => { seen = true; output.stdout(c) })
    proc.stderr.on('data', (c: Buffer) => { seen = true; output.stderr(c) })
    void outputClosed(proc).then(finish)
    const stop = (): void => {
      clearTimeout(quiet)
      timers.push(setTimeout(finish, Math.max(RESULT_GRACE_MS, kill() + 5000)))
    }
    disarm = armDeadline(opts.timeoutMs, opts.signal,
      () => { if (!done && !cancelled && !output.exited()) { timedOut = true; stop() } },
      () => { if (!done && !timedOut && !cancelled) { cancelled = true; stop() } })
    unwatch = stall(() => seen)
  })
}

/** Phrases of fork failures (bash, dash) and of jobs killed by SIGKILL: hints only, the engine decides. */
const FORK_HINTS = ['Resource temporarily unavailable', 'Cannot fork']
const HINT_CARRY = 40

/**
 * stdout decoded as UTF-8 (sequences never split) for onOutput, without the wrapper's end marker;
 * stderr carries the wrapper's exit sentinel. `onStdout` runs when the marker or later stdout arrives.
 */
function mergedOutput (reg: Registry, onOutput: (text: string) => void, onForkErrors: () => void, onStdout: () => void, onExit: (code: number) => void): {
  stdout: (data: Buffer) => void,
  stderr: (data: Buffer) => void,
  exited: () => boolean,
  settled: () => boolean,
  pids: () => number | undefined,
  end: () => void,
  hints: { fork: boolean, killed: boolean },
  cannotFork: () => boolean
} {
  const decoder = new TextDecoder('utf-8')
  const sink = outputSink(reg, onOutput, onForkErrors)
  const { emit, hints } = sink
  const parser = new SentinelParser(emit, onExit)
  const eof = new EofFilter(data => {
    emit(decoder.decode(data, { stream: true }))
    if (eof.seen) onStdout()
  }, onStdout)
  return {
    stdout: data => eof.push(data),
    stderr: data => parser.push(data),
    exited: () => parser.exitCode !== null,
    settled: () => parser.exitCode !== null && eof.seen,
    pids: () => parser.pids,
    end: () => { eof.end(); parser.end(); emit(decoder.decode()) },
    hints,
    cannotFork: () => sink.total() < HINT_CARRY * 2 && /^sh: \d+: Cannot fork\n?$/.test(sink.head())
  }
}

/**
 * Hands decoded output to onOutput and scans it for fork failures and SIGKILLed jobs (hints that
 * make the driver ask the engine). Shared by the exec path and the agent path (agent-exec.ts).
 */
export function outputSink (reg: Registry, onOutput: (text: string) => void, onForkErrors: () => void): {
  emit: (text: string) => void, hints: { fork: boolean, killed: boolean }, total: () => number, head: () => string
} {
  const hints = { fork: false, killed: false }
  let tail = ''
  let head = ''
  let total = 0
  const emit = (text: string): void => {
    if (text === '') return
    total += text.length
    if (head.length < HINT_CARRY * 2) head += text.slice(0, HINT_CARRY * 2)
    if (!hints.fork || !hints.killed) {
      // A bounded scan with a short carry, so a phrase split across chunks is still seen.
      const window = tail + text.slice(0, 4096) + (text.length > 4096 ? '\n' + text.slice(-4096) : '')
      if (!hints.fork && FORK_HINTS.some(h => window.includes(h))) { hints.fork = true; onForkErrors() }
      if (window.includes('Killed')) hints.killed = true
      tail = text.slice(-HINT_CARRY)
    }
    try { onOutput(text) } catch (err) { reg.log.warn({ err }, 'onOutput threw') }
  }
  return { emit, hints, total: () => total, head: () => head }
}
