import { rawExec } from './exec.js'
import { killArgv } from './exec-stream.js'
import { clampMs, type Entry, type Registry } from './registry.js'
import { diagnose, pidsNotice, restartSandbox } from './saturation.js'

/*
 * The kill path of a timed-out or cancelled exec (docs/contract.md#bash_tool): every exec of a chat
 * carries CUBICLE_EXEC_ID=<hex>; a second exec signals the processes carrying that marker and the
 * process groups they lead (KILL_SCRIPT in exec-stream.ts).
 */

/**
 * Timeout/abort of an exec: SIGTERM to its marked processes now, SIGKILL after killGraceMs. The
 * SIGKILL pass runs even when the call has already returned (its output may have closed while
 * processes that redirected theirs live on). Returns the SIGKILL delay.
 */
export function terminate (reg: Registry, entry: Entry, execId: string, user: string, killGraceMs = reg.opts.killGraceMs): number {
  void killMarked(reg, entry, execId, 'TERM', user)
  setTimeout(() => { void killMarked(reg, entry, execId, 'KILL', user) }, clampMs(killGraceMs)).unref()
  return killGraceMs
}

/**
 * Signals every process carrying the exec's marker (second exec as the same user). When SIGKILL
 * cannot be delivered (no exec can start: the pids limit is exhausted, typically by a fork bomb) or
 * marked processes survive it, the sandbox is restarted (files kept) and the next result says why.
 */
async function killMarked (reg: Registry, entry: Entry, execId: string, signal: 'TERM' | 'KILL', user: string): Promise<void> {
  const sandboxId = entry.sandboxId
  if (sandboxId === undefined || reg.closed) return
  let ok = false
  try {
    const r = await rawExec(reg, sandboxId, killArgv(signal, execId), { user, timeoutMs: 4000, cwd: '/' }, undefined, false)
    const m = /^done (\d+) (\d+)/m.exec(r.stdout.toString('utf8'))
    ok = m !== null && m[2] === '0'
    if (!ok && !reg.closed) reg.log.warn({ chat: entry.names.key, signal, result: r.stdout.toString('utf8').slice(0, 100), stderr: r.stderr.toString('utf8').slice(0, 200) }, 'kill exec did not complete')
  } catch (err) {
    if (!reg.closed) reg.log.warn({ chat: entry.names.key, signal, err }, 'kill exec failed')
  }
  // The sandbox may have been restarted or replaced meanwhile: then the processes are gone anyway.
  if (ok || signal !== 'KILL' || reg.closed || entry.sandboxId !== sandboxId || entry.state !== 'running') return
  reg.log.warn({ chat: entry.names.key }, 'processes of a timed-out command cannot be killed from inside; restarting the sandbox (files kept)')
  const d = await diagnose(reg, entry, { stats: true })
  const notice = d.pidsFull ? pidsNotice(reg, d, 'restarted') : { kind: 'unkillable' as const, action: 'restarted' as const }
  await restartSandbox(reg, entry, notice).catch(err => {
    reg.log.error({ chat: entry.names.key, err }, 'restarting the sandbox failed')
  })
}
