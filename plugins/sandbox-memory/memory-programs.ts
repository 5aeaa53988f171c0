import { posix } from 'node:path'
import type { ExecSignal } from '../sandbox/types.js'
import { COMMANDS, Exit } from './memory-commands.js'
import type { Program } from './memory-process.js'
import { Shell, shellProgram, type ShellHost } from './memory-shell.js'

/*
 * What an exec's argv runs in the in-memory engine: `sh -c`/`bash -c` scripts through the shell
 * (bash_tool's wrapper among them), a command of memory-commands.ts on its own, and the core's kill
 * script, named `cubicle-kill` ($0), which is beyond the shell's subset (loops, /proc): it is an
 * applet here with the script's contract: signal every process whose environment carries
 * CUBICLE_EXEC_ID=<id>, print `done <signalled> <left>`. Anything else is not found, as in an
 * image without that program.
 */

/** The sandbox as its programs see it: the shell's host and the processes to count or signal. */
export interface ProgramHost extends ShellHost {
  /** the sandbox's processes with their environment (the kill script's marker) */
  marked: (name: string, value: string) => Array<{ signal: (s: ExecSignal) => Promise<void> }>
}

const SHELLS = new Set(['sh', 'bash'])

/** The core's kill script: `sig` to every process whose environment carries CUBICLE_EXEC_ID=`id`. */
function killer (host: ProgramHost, signal: string, id: string): Program {
  return async io => {
    if (signal !== 'TERM' && signal !== 'KILL') { io.err(`bad signal ${signal}\n`); return 2 }
    const marked = host.marked('CUBICLE_EXEC_ID', id)
    await Promise.all(marked.map(async p => { await p.signal(signal) }))
    io.out(`done ${marked.length} 0\n`)
    return 0
  }
}

export function programFor (argv: string[], host: ProgramHost): Program {
  const [bin = '', flag, script, ...rest] = argv
  const name = posix.basename(bin)
  if (SHELLS.has(name) && flag === '-c' && script !== undefined) {
    if (rest[0] === 'cubicle-kill') return killer(host, rest[1] ?? '', rest[2] ?? '')
    return async io => await shellProgram(io, host, script, rest)
  }
  const impl = COMMANDS[name]
  if (impl === undefined || SHELLS.has(name)) {
    return async io => { io.err(`exec: "${bin}": stat ${bin}: no such file or directory\n`); return 127 }
  }
  return async io => {
    const shell = new Shell(io, host, { ...io.env }, [bin])
    try { return await impl({ shell, args: argv.slice(1), out: io.out, err: io.err, stdin: undefined }) } catch (e) {
      if (e instanceof Exit) return e.code
      throw e
    }
  }
}
