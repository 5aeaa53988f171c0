import type { SubagentCli } from '../../core/config.js'
import type { CliProcess } from './types.js'
import { isCliCommand } from './cli.js'
import { oneLine } from './text.js'

/*
 * Processes of the active CLI (docs/contract.md#terminal): listed with ps as the sandbox user (only that user's
 * processes exist for it), filtered by command line, killed as that user, so the kernel itself refuses
 * anything else. ps output is untrusted: bounded, parsed line by line, no backtracking patterns.
 */

export const MAX_PROCESSES = 10
const MAX_COMMAND = 100
const MAX_LINE = 8192
/** Highest pid Linux hands out (PID_MAX_LIMIT). */
const PID_MAX = 4194304

export const PS_ARGV = ['ps', '-ww', '-u', 'assistant', '-o', 'pid=,etimes=,args=']

export interface PsEntry { pid: number, elapsedSeconds: number, args: string }

/** `pid etimes args` lines; malformed lines and PID 1 are dropped. */
export function parsePs (output: string): PsEntry[] {
  const out: PsEntry[] = []
  for (const raw of output.split('\n')) {
    const line = raw.length > MAX_LINE ? raw.slice(0, MAX_LINE) : raw
    const m = /^ *([0-9]{1,10}) +([0-9]{1,12}) (.*)$/.exec(line)
    if (m === null) continue
    const pid = Number(m[1])
    if (pid <= 1 || pid > PID_MAX) continue
    out.push({ pid, elapsedSeconds: Number(m[2]), args: (m[3] ?? '').trim() })
  }
  return out
}

/** The CLI's processes in pid order, at most MAX_PROCESSES, with their full command line kept for kill(). */
export function cliProcesses (cli: SubagentCli, entries: PsEntry[]): Array<CliProcess & { args: string }> {
  return entries
    .filter(e => isCliCommand(cli, e.args))
    .sort((a, b) => a.pid - b.pid)
    .slice(0, MAX_PROCESSES)
    .map(e => ({ pid: e.pid, elapsed_minutes: Math.floor(e.elapsedSeconds / 60), command: oneLine(e.args, MAX_COMMAND), args: e.args }))
}

/** A pid from a caller: an integer in 2..PID_MAX (PID 1 is the sandbox's init). */
export const validPid = (pid: number): boolean => Number.isInteger(pid) && pid > 1 && pid <= PID_MAX

/**
 * Run as the sandbox user: signals `pid` only while its command line is still exactly the one the
 * server checked, waits up to `tenths` tenths of a second for it to end (a zombie counts as ended),
 * then SIGKILLs it. Prints `gone` (no longer that process), `term` or `kill`.
 */
const KILL_SCRIPT = `
pid=$1; want=$2; tenths=$3
[ "$(ps -ww -o args= -p "$pid" 2>/dev/null)" = "$want" ] || { echo gone; exit 0; }
kill -TERM "$pid" 2>/dev/null || { echo gone; exit 0; }
alive() { s=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -c1); [ -n "$s" ] && [ "$s" != Z ]; }
i=0
while [ $i -lt "$tenths" ] && alive; do sleep 0.1; i=$((i + 1)); done
if alive; then kill -KILL "$pid" 2>/dev/null; echo kill; else echo term; fi
`

export function killArgv (pid: number, args: string, graceMs: number): string[] {
  return ['/bin/sh', '-c', KILL_SCRIPT, 'cubicle-kill', String(pid), args, String(Math.max(0, Math.ceil(graceMs / 100)))]
}
