import type { Entry } from './chats.js'
import { clampMs } from './clock.js'
import type { CoreBase } from './context.js'
import { collectExec } from './exec-collect.js'
import { killArgv } from './exec-stream.js'
import type { Saturation } from './saturation.js'

/*
 * The kill path of a timed-out or cancelled exec (docs/contract.md#bash_tool): every exec of a chat
 * carries CUBICLE_EXEC_ID=<hex>; a second exec signals the processes carrying that marker and the
 * process groups they lead (KILL_SCRIPT in exec-stream.ts).
 */

/** The kill path of a chat's timed-out or cancelled exec. */
export interface Kill {
  terminate: (entry: Entry, execId: string, user: string, killGraceMs?: number) => number
}

export function createKill (base: Pick<CoreBase, 'engine' | 'log' | 'opts' | 'clock' | 'status' | 'streams'>, saturation: Pick<Saturation, 'diagnose' | 'pidsNotice' | 'restartSandbox'>): Kill {
  const { log, opts, status } = base

  /**
   * Timeout/abort of an exec: SIGTERM to its marked processes now, SIGKILL after killGraceMs. The
   * SIGKILL pass runs even when the call has already returned (its output may have closed while
   * processes that redirected theirs live on). Returns the SIGKILL delay.
   */
  function terminate (entry: Entry, execId: string, user: string, killGraceMs = opts.killGraceMs): number {
    void killMarked(entry, execId, 'TERM', user)
    setTimeout(() => { void killMarked(entry, execId, 'KILL', user) }, clampMs(killGraceMs)).unref()
    return killGraceMs
  }

  /**
   * Signals every process carrying the exec's marker (second exec as the same user). When SIGKILL
   * cannot be delivered (no exec can start: the pids limit is exhausted, typically by a fork bomb) or
   * marked processes survive it, the sandbox is restarted (files kept) and the next result says why.
   */
  async function killMarked (entry: Entry, execId: string, signal: 'TERM' | 'KILL', user: string): Promise<void> {
    const sandboxId = entry.sandboxId
    if (sandboxId === undefined || status.closed) return
    let ok = false
    try {
      const r = await collectExec(base, sandboxId, killArgv(signal, execId), { user, timeoutMs: 4000, cwd: '/' }, false)
      const m = /^done (\d+) (\d+)/m.exec(r.stdout.toString('utf8'))
      ok = m !== null && m[2] === '0'
      if (!ok && !status.closed) log.warn({ chat: entry.names.key, signal, result: r.stdout.toString('utf8').slice(0, 100), stderr: r.stderr.toString('utf8').slice(0, 200) }, 'kill exec did not complete')
    } catch (err) {
      if (!status.closed) log.warn({ chat: entry.names.key, signal, err }, 'kill exec failed')
    }
    // The sandbox may have been restarted or replaced meanwhile: then the processes are gone anyway.
    if (ok || signal !== 'KILL' || status.closed || entry.sandboxId !== sandboxId || entry.state !== 'running') return
    log.warn({ chat: entry.names.key }, 'processes of a timed-out command cannot be killed from inside; restarting the sandbox (files kept)')
    const d = await saturation.diagnose(entry, { stats: true })
    const notice = d.pidsFull ? saturation.pidsNotice(d, 'restarted') : { kind: 'unkillable' as const, action: 'restarted' as const }
    await saturation.restartSandbox(entry, notice).catch(err => {
      log.error({ chat: entry.names.key, err }, 'restarting the sandbox failed')
    })
  }

  return { terminate }
}
