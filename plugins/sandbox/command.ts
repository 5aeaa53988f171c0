import { randomBytes } from 'node:crypto'
import type { Activity } from './activity.js'
import type { AgentExec } from './agent-exec.js'
import type { Entry } from './chats.js'
import type { CoreBase } from './context.js'
import type { DiskWatchdog } from './disk-watchdog.js'
import type { ExecProcess } from './engine-types.js'
import { toEnvList } from './env.js'
import { resultGrace, watchProcess, watchStart, type StallWatch } from './exec-watch.js'
import { HINT_CARRY, outputSink, restartedSince, type Outcome } from './exec-outcome.js'
import { commandArgv, EofFilter, SentinelParser } from './exec-stream.js'
import type { Kill } from './kill.js'
import { takeNotices } from './notices.js'
import { notRunning, type Recovery } from './recovery.js'
import { SANDBOX_USER } from './sandbox-spec.js'
import type { Transitions } from './transitions.js'
import type { CommandOptions, CommandResult, SandboxNotice } from './types.js'

/*
 * runCommand(), the bash_tool path (docs/contract.md#bash_tool): `bash -c` inside a wrapper that reports bash's
 * status on stderr and marks the end of its output on stdout (exec-stream.ts), so the call returns as
 * soon as bash exits and its output is in, even while background children hold stdout open. A
 * sandbox found gone is started again and the command runs once more (recovery.ts); one found
 * saturated is restarted (saturation.ts), and the command runs once more when it never started; so does
 * a command whose agent stream was lost before its process existed (agent-exec.ts), or whose exec the
 * engine refused because the sandbox had stopped meanwhile (ExecExit.notRunning).
 */

const DRAIN_MS = 1000
const QUIET_MS = 200

/** What an attempt may still do: run the command once more (it never started), recover a sandbox found not running at the start. */
interface Tries { retry: boolean, recover: boolean }

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

/** The roles bash_tool's command builds on. */
export interface CommandDeps {
  activity: Pick<Activity, 'holdLease'>
  agentExec: Pick<AgentExec, 'agentCommand'>
  recovery: Pick<Recovery, 'runningEntry' | 'recoverVanished' | 'recoverUnstarted'>
  kill: Kill
  outcome: Pick<Outcome, 'relieve' | 'afterExit' | 'explainLoss'>
  transitions: Pick<Transitions, 'execStartError'>
  disk: Pick<DiskWatchdog, 'poke'>
}

export function createCommand (base: Pick<CoreBase, 'engine' | 'log' | 'opts' | 'clock' | 'streams'>, d: CommandDeps): {
  runCommand: (chatId: string, command: string, opts: CommandOptions) => Promise<CommandResult>
} {
  const { engine, log, clock } = base
  const { activity, agentExec, recovery, kill, outcome, transitions, disk } = d

  async function runCommand (chatId: string, command: string, opts: CommandOptions): Promise<CommandResult> {
    const entry = await recovery.runningEntry(chatId)
    const release = activity.holdLease(entry)
    const own: SandboxNotice[] = []
    try {
      const result = await attempt(entry, command, opts, own, clock.real(), { retry: true, recover: true })
      const notices = takeNotices(entry, own)
      return notices.length > 0 ? { ...result, notices } : result
    } finally {
      release()
      disk.poke(entry)
    }
  }

  async function attempt (entry: Entry, command: string, opts: CommandOptions, own: SandboxNotice[], t0: number, tries: Tries): Promise<CommandResult> {
    const at = clock.real()
    const again = async (recover = false): Promise<CommandResult> => {
      opts.onReset?.()
      return await attempt(entry, command, opts, own, t0, { retry: false, recover })
    }
    /**
     * Nothing of the command ran: the agent's stream was lost before bash existed (a sandbox killed under it,
     * or the agent alone), or the engine refused the exec because the sandbox had stopped. It runs once more,
     * in the sandbox started again if it had stopped. A sandbox still reported running may be dying: the next
     * attempt's start may still recover it.
     */
    const unstarted = async (): Promise<CommandResult> => {
      if (tries.retry && opts.signal?.aborted !== true) {
        const u = await recovery.recoverUnstarted(entry)
        if (u.notice !== undefined) own.push(u.notice)
        if (u.retry) return await again(u.notice === undefined && tries.recover)
      }
      await outcome.explainLoss(entry, at, own)
      return { exitCode: null, timedOut: false, cancelled: opts.signal?.aborted === true }
    }
    // The in-sandbox agent when it can serve the call; docker exec otherwise (agent-exec.ts).
    const viaAgent = await agentExec.agentCommand(entry, command, opts, own, t0)
    if (viaAgent === 'unstarted') return await unstarted()
    if (viaAgent !== undefined) return viaAgent
    const execId = randomBytes(12).toString('hex')
    const env = toEnvList(opts.env, { PAGER: 'cat', GIT_PAGER: 'cat', DEBIAN_FRONTEND: 'noninteractive', CUBICLE_EXEC_ID: execId })
    let proc: ExecProcess
    try {
      // The wait for an exec slot counts toward the command's timeout and ends with its signal.
      proc = await engine.exec(entry.sandboxId ?? '', { argv: commandArgv(command), user: SANDBOX_USER, cwd: '/home/assistant', env, signal: opts.signal, deadline: t0 + opts.timeoutMs })
    } catch (err) {
      const e = transitions.execStartError(entry, err)
      if (!tries.recover || !notRunning(e)) throw e
      const notice = await recovery.recoverVanished(entry)
      if (notice !== undefined) own.push(notice)
      return await again()
    }
    // A start that hangs, or fork failures in the output: ask the engine at once, and restart a
    // saturated sandbox while the command is still running (the restart ends its stream).
    let stalled = false
    let relieving: Promise<boolean> | undefined
    const relieveNow = (confirm: boolean): void => {
      relieving ??= outcome.relieve(entry, confirm).catch(err => {
        log.warn({ chat: entry.names.key, err }, 'restarting a saturated sandbox failed')
        return false
      })
    }
    const w = await watchCommand(proc, { ...opts, timeoutMs: Math.max(1000, opts.timeoutMs - (at - t0)) },
      () => kill.terminate(entry, execId, SANDBOX_USER, opts.killGraceMs),
      seen => watchStart(proc, seen, () => { stalled = true; relieveNow(false) }),
      () => { relieveNow(true) })
    const relieved = relieving !== undefined && await relieving
    const result: CommandResult = { exitCode: w.exitCode, timedOut: w.timedOut, cancelled: w.cancelled }
    const retry = tries.retry && opts.signal?.aborted !== true
    if (w.sentinel || w.timedOut || w.cancelled) {
      // The wrapper could not even fork bash: nothing of the command ran.
      if (retry && w.cannotFork && w.exitCode === 2 && (relieved || restartedSince(entry, at) || await outcome.relieve(entry))) return await again()
      await outcome.afterExit(entry, w, at, own, relieved || restartedSince(entry, at))
      return result
    }
    // The stream ended without bash's status: the process never started, or the sandbox went away.
    // (Its only output the wrapper's own fork failure: bash never ran either.)
    const exit = await proc.exit
    const notStarted = exit.notStarted || (stalled && !w.seen) || w.cannotFork
    if (retry && notStarted && (relieved || restartedSince(entry, at) || await outcome.relieve(entry))) return await again()
    // Not a saturated sandbox: the engine refused the start because the sandbox had stopped meanwhile.
    if (exit.notRunning === true) return await unstarted()
    await outcome.explainLoss(entry, at, own)
    return result
  }

  /** Streams the command's output until bash's status arrived and the output went quiet, or until timeout/abort. */
  async function watchCommand (proc: ExecProcess, opts: CommandOptions, kill: () => number, stall: StallWatch,
    onForkErrors: () => void): Promise<Watched> {
    let quiet: NodeJS.Timeout | undefined
    let exitCode: number | null = null
    let output: ReturnType<typeof mergedOutput> | undefined
    const end = await watchProcess(base, proc, {
      timeoutMs: opts.timeoutMs,
      signal: opts.signal,
      stall,
      // bash exited already: only its output is awaited, a timeout no longer counts.
      pastTimeout: () => output?.exited() === true,
      stop: () => { clearTimeout(quiet); return resultGrace(kill()) },
      onFinish: () => { clearTimeout(quiet); output?.end() }
    }, w => {
      // Once bash's status and the end of its output are both in, wait for QUIET_MS without output
      // (background children may still print), then return even if they hold the output open.
      const settle = (): void => {
        if (output?.settled() !== true) return
        clearTimeout(quiet)
        quiet = setTimeout(w.finish, QUIET_MS)
      }
      output = mergedOutput(opts.onOutput, onForkErrors, settle, code => {
        if (w.timedOut || w.cancelled) return
        exitCode = code
        // bash has exited: return within DRAIN_MS whatever is still in flight.
        w.finishIn(DRAIN_MS)
        settle()
      })
      const out = output
      proc.stdout.on('data', (c: Buffer) => { out.stdout(c) })
      proc.stderr.on('data', (c: Buffer) => { out.stderr(c) })
    })
    const out = output as ReturnType<typeof mergedOutput>
    return {
      exitCode,
      timedOut: end.timedOut,
      cancelled: end.cancelled,
      sentinel: out.exited(),
      seen: end.seen,
      pids: out.pids(),
      forkErrors: out.hints.fork,
      killedJobs: out.hints.killed,
      cannotFork: out.cannotFork()
    }
  }

  /**
   * stdout decoded as UTF-8 (sequences never split) for onOutput, without the wrapper's end marker;
   * stderr carries the wrapper's exit sentinel. `onStdout` runs when the marker or later stdout arrives.
   */
  function mergedOutput (onOutput: (text: string) => void, onForkErrors: () => void, onStdout: () => void, onExit: (code: number) => void): {
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
    const sink = outputSink(log, onOutput, onForkErrors)
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

  return { runCommand }
}
