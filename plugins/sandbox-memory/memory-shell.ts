import { posix } from 'node:path'
import type { ExecSignal } from '../sandbox/types.js'
import type { ProgramIo } from './memory-process.js'
import { parse, ShellSyntaxError, tokenize, type Command, type Step, type Word } from './memory-shell-parse.js'
import { COMMANDS, Exit, type Sink } from './memory-commands.js'
import { FsError, type MemoryFs } from './memory-fs.js'

/*
 * Runs the shell language of memory-shell-parse.ts against an in-memory sandbox: builtins and the
 * few commands of memory-commands.ts, files through the sandbox's filesystem (memory-fs.ts).
 * Background jobs whose output is not redirected keep the process's output open until they end,
 * as a real background child holds the pipe.
 */

/** What the shell reaches of its sandbox. */
export interface ShellHost {
  hostname: string
  fs: MemoryFs
  /** the sandbox's other processes (pkill, the core's kill script) */
  processes: () => Array<{ commandLine: string, env: Record<string, string>, signal: (s: ExecSignal) => Promise<void> }>
}

export class Shell {
  status = 0
  cwd: string
  /** background jobs still running (shared with child shells); `holding` ones keep the process's output open */
  readonly jobs: Set<Promise<number>>
  readonly holding: Set<Promise<number>>

  constructor (readonly io: ProgramIo, readonly host: ShellHost, readonly vars: Record<string, string>, readonly args: string[], parent?: Shell) {
    this.cwd = parent?.cwd ?? io.cwd
    this.jobs = parent?.jobs ?? new Set()
    this.holding = parent?.holding ?? new Set()
  }

  /** Runs a script; `exit` inside it ends it with that status. */
  async run (script: string, out: Sink = this.io.out, err: Sink = this.io.err): Promise<number> {
    let steps
    try { steps = parse(script) } catch (e) {
      if (!(e instanceof ShellSyntaxError)) throw e
      err(`sh: ${e.message}\n`)
      return (this.status = 2)
    }
    return await this.steps(steps, out, err)
  }

  private async steps (steps: Step[], out: Sink, err: Sink): Promise<number> {
    for (const step of steps) {
      if (step.join === '&&' && this.status !== 0) continue
      if (step.join === '||' && this.status === 0) continue
      if (step.background) {
        const quiet = step.command.redirects.some(r => r.fd === 1 && r.op !== '<')
        const job = this.command(step.command, out, err).catch(e => e instanceof Exit ? e.code : 1)
        this.jobs.add(job)
        if (!quiet) this.holding.add(job)
        void job.finally(() => { this.jobs.delete(job); this.holding.delete(job) })
        this.status = 0
        continue
      }
      this.status = await this.command(step.command, out, err)
    }
    return this.status
  }

  async expand (w: Word): Promise<string> {
    let s = ''
    for (const p of w) {
      if (p.t === 'lit') s += p.v
      else if (p.t === 'var') {
        const v = this.variable(p.name)
        // ${NAME:+word}: word when NAME is set and not empty.
        s += p.alt === undefined ? v : v === '' ? '' : await this.expand(tokenize(`"${p.alt.replace(/"/g, '\\"')}"`).flatMap(t => t.k === 'word' ? t.w : []))
      } else {
        let captured = ''
        await this.child(this.args).run(p.script, text => { captured += text.toString() }, this.io.err).catch(e => { if (!(e instanceof Exit)) throw e })
        s += captured.replace(/\n+$/, '')
      }
    }
    return s
  }

  private variable (name: string): string {
    if (name === '?') return String(this.status)
    if (/^\d+$/.test(name)) return this.args[Number(name)] ?? ''
    return this.vars[name] ?? ''
  }

  /** A child shell (`sh -c`, `$(…)`): a copy of the variables, the same cwd and jobs; `io` as given (its stdin redirected). */
  child (args: string[], io: ProgramIo = this.io): Shell {
    return new Shell(io, this.host, { ...this.vars }, args, this)
  }

  path (p: string): string { return posix.resolve(this.cwd, p) }

  private async command (c: Command, out: Sink, err: Sink): Promise<number> {
    const sinks: Record<1 | 2, Sink> = { 1: out, 2: err }
    const files: Array<{ path: string, append: boolean, data: Buffer[] }> = []
    let stdin: Buffer | undefined
    for (const r of c.redirects) {
      const target = await this.expand(r.target)
      if (r.op === '<') {
        if (target === '/dev/null') { stdin = Buffer.alloc(0); continue }
        const f = await this.host.fs.read(this.path(target))
        if (f === null) { err(`sh: cannot open ${target}: No such file\n`); return 2 }
        stdin = f.data
        continue
      }
      const fd = r.fd === 0 ? 1 : r.fd
      if (r.op === '>&') { sinks[fd] = target === '2' ? sinks[2] : sinks[1]; continue }
      if (target === '/dev/null') { sinks[fd] = () => {}; continue }
      const file = { path: this.path(target), append: r.op === '>>', data: [] as Buffer[] }
      files.push(file)
      sinks[fd] = text => { file.data.push(Buffer.from(text)) }
    }
    const words: string[] = []
    let assigning = true
    for (const w of c.words) {
      const head = w[0]
      const m = assigning && head?.t === 'lit' ? /^([A-Za-z_][A-Za-z0-9_]*)=/.exec(head.v) : null
      if (m === null) { assigning = false; words.push(await this.expand(w)); continue }
      this.vars[m[1] ?? ''] = await this.expand([{ t: 'lit', v: head?.t === 'lit' ? head.v.slice(m[0].length) : '' }, ...w.slice(1)])
    }
    let status: number
    if (c.group !== undefined) status = await this.steps(c.group, sinks[1], sinks[2])
    else if (words.length === 0) status = 0
    else {
      const [name = '', ...args] = words
      const impl = COMMANDS[name] ?? COMMANDS[posix.basename(name)]
      if (impl === undefined) { sinks[2](`sh: 1: ${name}: not found\n`); status = 127 } else {
        status = await impl({ shell: this, args, out: sinks[1], err: sinks[2], stdin }).catch(e => {
          if (!(e instanceof FsError)) throw e
          sinks[2](`${name}: ${e.message}\n`)
          return 1
        })
      }
    }
    for (const f of files) {
      try {
        await this.host.fs.write(f.path, Buffer.concat(f.data), { append: f.append, uid: this.uid(), gid: this.uid() })
      } catch (e) {
        if (!(e instanceof FsError)) throw e
        err(`sh: cannot create ${f.path}: ${e.message}\n`)
        status = 2
      }
    }
    return status
  }

  uid (): number { return this.io.user === 'root' || this.io.user === '0' ? 0 : 1000 }
}

/** `sh -c script [name args…]` as a program: the script's status, after the jobs that hold the output. */
export async function shellProgram (io: ProgramIo, host: ShellHost, script: string, args: string[], merge = false): Promise<number> {
  const shell = new Shell(io, host, { ...io.env }, args)
  let code: number
  try {
    code = await shell.run(script, io.out, merge ? io.out : io.err)
  } catch (e) {
    if (!(e instanceof Exit)) throw e
    code = e.code
  }
  await Promise.all(shell.holding)
  return code
}
