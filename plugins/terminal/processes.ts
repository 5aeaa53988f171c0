import type { CliProcess } from './types.js'
import { clip } from './text.js'

/*
 * Processes of the active sub-agent CLI (surface.md §7.2): listed with ps as the sandbox user (so
 * only that user's processes are seen), filtered by command line, and killed as that user, so the
 * kernel itself refuses anything else. ps output is untrusted input: bounded, parsed line by line.
 */

export type Cli = 'claude' | 'codex' | 'opencode'

/** Binary names and npm packages of each CLI (native binaries, or node/bun running the package's script). */
const CLI_MARKERS: Record<Cli, { names: string[], packages: string[] }> = {
  claude: { names: ['claude'], packages: ['@anthropic-ai/claude-code'] },
  codex: { names: ['codex'], packages: ['@openai/codex'] },
  opencode: { names: ['opencode'], packages: ['opencode-ai'] }
}
const RUNTIMES = new Set(['node', 'nodejs', 'bun', 'deno'])
const MAX_LINE = 8192
export const MAX_PROCESSES = 10
const MAX_COMMAND = 100

/** `ps` as the sandbox user: its own processes only, full command lines, no header. */
export const PS_ARGV = ['ps', '-ww', '-u', 'assistant', '-o', 'pid=,etimes=,args=']

const baseName = (path: string): string => path.slice(path.lastIndexOf('/') + 1)

/** True when a command line (ps `args`) is the CLI itself: `claude …`, `/opt/…/codex …`, `node …/@openai/codex/bin/codex.js …`. */
export function isCliCommand (cli: Cli, args: string): boolean {
  const { names, packages } = CLI_MARKERS[cli]
  const [first = '', second = ''] = args.split(' ', 2)
  if (names.includes(baseName(first))) return true
  if (!RUNTIMES.has(baseName(first))) return false
  return names.includes(baseName(second)) || packages.some(p => second.includes(`/node_modules/${p}/`))
}

export interface PsEntry { pid: number, elapsedSeconds: number, args: string }

/** Parses `pid etimes args` lines; malformed lines and PID 1 are dropped. */
export function parsePs (output: string): PsEntry[] {
  const out: PsEntry[] = []
  for (const raw of output.split('\n')) {
    const line = raw.length > MAX_LINE ? raw.slice(0, MAX_LINE) : raw
    const m = /^ *([0-9]{1,10}) +([0-9]{1,12}) (.*)$/.exec(line)
    if (m === null) continue
    const pid = Number(m[1])
    if (pid <= 1) continue
    out.push({ pid, elapsedSeconds: Number(m[2]), args: (m[3] as string).trim() })
  }
  return out
}

/** The CLI's processes in pid order, at most MAX_PROCESSES, in the reply's shape. */
export function cliProcesses (cli: Cli, entries: PsEntry[]): Array<CliProcess & { args: string }> {
  return entries
    .filter(e => isCliCommand(cli, e.args))
    .sort((a, b) => a.pid - b.pid)
    .slice(0, MAX_PROCESSES)
    .map(e => ({ pid: e.pid, elapsed_minutes: Math.floor(e.elapsedSeconds / 60), command: clip(e.args, MAX_COMMAND), args: e.args }))
}

/** Highest pid Linux can hand out (PID_MAX_LIMIT). */
const PID_MAX = 4194304

/** A pid from a URL: digits only, no sign or leading zero, 2..PID_MAX (PID 1 is the sandbox's init). Returns an error text or the pid. */
export function parsePid (raw: string): number | string {
  if (!/^[1-9][0-9]{0,6}$/.test(raw)) return 'pid must be a positive integer'
  const pid = Number(raw)
  if (pid === 1) return 'pid 1 is the sandbox\'s init and is never killed'
  if (pid > PID_MAX) return 'pid is out of range'
  return pid
}

/**
 * Kill script, run as the sandbox user: signals `pid` only while its command line is still exactly
 * the one the server checked, waits up to `grace` tenths of a second for it to end (a zombie counts
 * as ended), then SIGKILLs it. Prints `gone` when the process was no longer the checked one, else
 * `term` or `kill`.
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
  return ['/bin/sh', '-c', KILL_SCRIPT, 'cubicle-kill', String(pid), args, String(Math.ceil(graceMs / 100))]
}
