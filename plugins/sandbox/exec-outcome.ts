import type { Chats, Entry } from './chats.js'
import { sleep } from './clock.js'
import type { CoreBase } from './context.js'
import type { SandboxDetails } from './engine-types.js'
import { eventSince } from './notices.js'
import { pidsSuspicious, type Saturation } from './saturation.js'
import type { SandboxNotice } from './types.js'

/*
 * What an exec's end tells (docs/engine.md#the-core-inside), shared by the engine exec path (exec.ts,
 * command.ts) and the agent path (agent-exec.ts): a process that could not start or fork failures
 * (restart when the engine says saturated), a lost stream (ask the engine what happened), bash's exit
 * (OOM kills, a pids limit reached), and the scan of the output for those hints.
 */

/** Phrases of fork failures (bash, dash) and of jobs killed by SIGKILL: hints only, the engine decides. */
const FORK_HINTS = ['Resource temporarily unavailable', 'Cannot fork']
export const HINT_CARRY = 40

/**
 * Hands decoded output to onOutput and scans it for fork failures and SIGKILLed jobs (hints that
 * make the driver ask the engine). Shared by the exec path and the agent path (agent-exec.ts).
 */
export function outputSink (log: Pick<CoreBase['log'], 'warn'>, onOutput: (text: string) => void, onForkErrors: () => void): {
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
    try { onOutput(text) } catch (err) { log.warn({ err }, 'onOutput threw') }
  }
  return { emit, hints, total: () => total, head: () => head }
}

/** What the output of a command that ended showed (command.ts, agent-exec.ts). */
export interface ExitHints {
  exitCode: number | null
  /** process count the wrapper read after bash exited (a hint) */
  pids: number | undefined
  /** the output shows fork failures (EAGAIN) or SIGKILLed jobs: worth asking the engine */
  forkErrors: boolean
  killedJobs: boolean
}

/** The driver restarted or recreated the sandbox since `at` (a call cut off by it may run again). */
export function restartedSince (entry: Entry, at: number): boolean {
  const n = eventSince(entry, at)
  return n !== undefined && (n.action === 'restarted' || n.action === 'recreated')
}

/** The end of a chat's exec or command, as the engine explains it. */
export interface Outcome {
  relieve: (entry: Entry, confirm?: boolean) => Promise<boolean>
  checkAlive: (entry: Entry) => Promise<SandboxDetails | null | undefined>
  afterExit: (entry: Entry, w: ExitHints, at: number, own: SandboxNotice[], restarted: boolean) => Promise<void>
  explainLoss: (entry: Entry, at: number, own: SandboxNotice[]) => Promise<void>
}

export function createOutcome (base: Pick<CoreBase, 'engine' | 'log' | 'opts'>, chats: Chats, saturation: Saturation): Outcome {
  const { engine, log, opts } = base

  /**
   * A process could not start, or fork failures showed: restarts the sandbox when the engine says it
   * is saturated (`confirm`: on two samples). True when restarted.
   */
  async function relieve (entry: Entry, confirm = false): Promise<boolean> {
    if (entry.restarting !== null) { await entry.restarting; return true }
    const d = await saturation.diagnose(entry, { stats: true, confirm })
    if (!d.pidsFull && !d.memoryFull) return false
    await saturation.restartSandbox(entry, d.pidsFull ? saturation.pidsNotice(d, 'restarted') : saturation.memoryNotice(d, 'restarted'))
    return true
  }

  /** After an exec lost its stream: refresh the cached state (one inspect) and return what the engine said. */
  async function checkAlive (entry: Entry): Promise<SandboxDetails | null | undefined> {
    // A state change while the inspect was in flight (a stop() that ended meanwhile) wins over its answer:
    // applying a "running" read before that stop would make the next exec start the sandbox again.
    const epoch = entry.epoch
    const idle = entry.locked === 0 && entry.ensuring === null
    try {
      const c = await engine.inspect(entry.names.container)
      if (idle && entry.epoch === epoch && entry.locked === 0 && entry.ensuring === null) {
        const was = entry.state
        entry.state = c === null ? 'absent' : c.running ? 'running' : c.paused === true ? 'paused' : 'stopped'
        // Running in our cache, not any more, and not by our doing: the next exec starts it again.
        if (was === 'running' && entry.state !== 'running' && !entry.stopping) entry.recoverable = true
        chats.changed(entry)
      }
      return c
    } catch (err) {
      if (idle && entry.epoch === epoch && entry.locked === 0 && entry.ensuring === null) { entry.state = 'unknown'; chats.changed(entry) }
      log.debug({ err }, 'state check failed')
      return undefined
    }
  }

  /**
   * bash exited (or was timed out): ask the engine when the output or the wrapper's hint suggests
   * saturation (unless the sandbox was restarted during the call already) or OOM kills.
   */
  async function afterExit (entry: Entry, w: ExitHints, at: number, own: SandboxNotice[], restarted: boolean): Promise<void> {
    const suspicious = !restarted && (w.forkErrors || pidsSuspicious(w.pids, opts.pidsLimit))
    const killed = w.killedJobs || (w.exitCode !== null && w.exitCode >= 128)
    if (!suspicious && !killed) return
    const d = await saturation.diagnose(entry, { stats: suspicious, oomSince: killed ? at : undefined, confirm: true })
    if (d.oomKills > 0) own.push(saturation.memoryNotice(d, 'none'))
    if (d.pidsFull) await restartFor(entry, saturation.pidsNotice(d, 'restarted'), own)
  }

  /** Why a command lost its stream: a driver action, the sandbox stopped or removed outside, or saturation. */
  async function explainLoss (entry: Entry, at: number, own: SandboxNotice[]): Promise<void> {
    let c = await checkAlive(entry)
    // The engine may still report a killed container as running for a moment after its streams closed.
    for (let i = 0; i < 3 && c?.running === true; i++) {
      await sleep(250)
      c = await checkAlive(entry)
    }
    const ours = eventSince(entry, at)
    if (ours !== undefined) { own.unshift(ours); return }
    if (c === undefined) return
    if (c === null || !c.running) {
      // checkAlive marks a change it did not expect (not stop(), not a driver action) as recoverable.
      const by = entry.recoverable ? 'outside' : 'server'
      own.unshift(c?.oomKilled === true ? saturation.memoryNotice(null, 'stopped') : { kind: 'sandbox-stopped', action: 'stopped', removed: c === null, by })
      return
    }
    const d = await saturation.diagnose(entry, { stats: true, oomSince: at })
    if (d.pidsFull) await restartFor(entry, saturation.pidsNotice(d, 'restarted'), own, true)
    else own.unshift(d.oomKills > 0 ? saturation.memoryNotice(d, 'none') : { kind: 'stream-lost', action: 'none' })
  }

  /** Restarts a saturated sandbox; `notice` goes first in the result when it explains a lost command. */
  async function restartFor (entry: Entry, notice: SandboxNotice, own: SandboxNotice[], cause = false): Promise<void> {
    if (cause) own.unshift(notice)
    else own.push(notice)
    try {
      await saturation.restartSandbox(entry, notice)
    } catch (err) {
      // Killed but not started again: the next call starts it (the chat is marked recoverable).
      notice.action = 'stopped'
      log.warn({ chat: entry.names.key, err }, 'restarting a saturated sandbox failed')
    }
  }

  return { relieve, checkAlive, afterExit, explainLoss }
}
