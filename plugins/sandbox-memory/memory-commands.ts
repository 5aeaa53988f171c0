import type { ExecSignal } from '../sandbox/types.js'
import type { ProgramIo } from './memory-process.js'
import type { Shell } from './memory-shell.js'

/*
 * The commands of the in-memory sandbox (memory-shell.ts runs them): shell builtins and the handful
 * of utilities the sandbox core and the contract suite use, each with the options they use. An
 * unknown option is an error (status 2), never silently ignored.
 */

export type Sink = (text: string | Buffer) => void

/** `exit` unwinds the script with its status. */
export class Exit extends Error {
  constructor (readonly code: number) { super(`exit ${code}`) }
}

export interface Invocation {
  shell: Shell
  args: string[]
  out: Sink
  err: Sink
  /** stdin redirected from a file (or /dev/null); undefined: the process's own */
  stdin: Buffer | undefined
}

type Impl = (c: Invocation) => Promise<number>

const USERS: Record<number, string> = { 0: 'root', 1000: 'assistant' }
const SIGNAL_NAMES = new Set<ExecSignal>(['HUP', 'INT', 'TERM', 'KILL'])

async function stdinOf (c: Invocation): Promise<Buffer> { return c.stdin ?? await c.shell.io.input() }

async function sleep (c: Invocation, seconds: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  try {
    await Promise.race([new Promise(resolve => { timer = setTimeout(resolve, seconds * 1000) }), c.shell.io.killed])
  } finally { clearTimeout(timer) }
}

/** printf's escapes and %s/%d, one pass over the format (no reuse for extra arguments). */
function format (fmt: string, args: string[]): string {
  let i = 0
  return fmt.replace(/\\(0[0-7]{0,3}|[nt\\])|%([sd%])/g, (_m, esc: string | undefined, conv: string | undefined) => {
    if (esc !== undefined) return esc === 'n' ? '\n' : esc === 't' ? '\t' : esc === '\\' ? '\\' : String.fromCharCode(parseInt(esc, 8))
    if (conv === '%') return '%'
    const a = args[i++] ?? ''
    return conv === 'd' ? String(Number.parseInt(a, 10) || 0) : a
  })
}

export const COMMANDS: Record<string, Impl> = {
  true: async () => 0,
  ':': async () => 0,
  false: async () => 1,
  exit: async c => { throw new Exit(c.args[0] === undefined ? c.shell.status : Number(c.args[0]) & 255) },
  echo: async c => {
    const n = c.args[0] === '-n'
    c.out(`${(n ? c.args.slice(1) : c.args).join(' ')}${n ? '' : '\n'}`)
    return 0
  },
  printf: async c => { c.out(format(c.args[0] ?? '', c.args.slice(1))); return 0 },
  pwd: async c => { c.out(`${c.shell.cwd}\n`); return 0 },
  cd: async c => {
    const to = c.shell.path(c.args[0] ?? c.shell.vars.HOME ?? '/')
    if (!await c.shell.host.fs.isDir(to)) { c.err(`sh: cd: can't cd to ${c.args[0] ?? ''}\n`); return 2 }
    c.shell.cwd = to
    return 0
  },
  hostname: async c => { c.out(`${c.shell.host.hostname}\n`); return 0 },
  id: async c => {
    const uid = c.shell.uid()
    const answers: Record<string, string> = { '-u': String(uid), '-g': String(uid), '-un': USERS[uid] ?? String(uid), '-gn': USERS[uid] ?? String(uid) }
    const a = answers[c.args[0] ?? '']
    if (a === undefined) { c.err('id: only -u, -g, -un, -gn\n'); return 2 }
    c.out(`${a}\n`)
    return 0
  },
  env: async c => { c.out(Object.entries(c.shell.vars).map(([k, v]) => `${k}=${v}\n`).join('')); return 0 },
  cat: async c => {
    if (c.args.length === 0) { c.out(await stdinOf(c)); return 0 }
    let status = 0
    for (const a of c.args) {
      const f = await c.shell.host.fs.read(c.shell.path(a))
      if (f === null) { c.err(`cat: ${a}: No such file or directory\n`); status = 1 } else c.out(f.data)
    }
    return status
  },
  read: async c => {
    const names = c.args.filter(a => a !== '-r')
    const line = c.stdin !== undefined ? (c.stdin.toString('utf8').split('\n')[0] ?? null) : await c.shell.io.line()
    if (line === null || (c.stdin !== undefined && c.stdin.length === 0)) return 1
    if (names[0] !== undefined) c.shell.vars[names[0]] = line
    return 0
  },
  sleep: async c => { await sleep(c, Number(c.args[0] ?? 0)); return 0 },
  wait: async c => { await Promise.race([Promise.all(c.shell.jobs), c.shell.io.killed]); return 0 },
  stty: async c => {
    if (c.args[0] !== 'size' || !c.shell.io.tty) { c.err('stty: standard input: Inappropriate ioctl for device\n'); return 1 }
    const { rows, cols } = c.shell.io.size()
    c.out(`${rows} ${cols}\n`)
    return 0
  },
  stat: async c => {
    if (c.args[0] !== '-c' || c.args.length < 3) { c.err('stat: only -c FORMAT FILE…\n'); return 2 }
    let status = 0
    for (const a of c.args.slice(2)) {
      const f = await c.shell.host.fs.read(c.shell.path(a))
      if (f === null) { c.err(`stat: cannot statx '${a}': No such file or directory\n`); status = 1; continue }
      const fields: Record<string, string> = { a: f.mode.toString(8), u: String(f.uid), g: String(f.gid), s: String(f.data.length), U: USERS[f.uid] ?? String(f.uid), G: USERS[f.gid] ?? String(f.gid), n: a }
      c.out(`${(c.args[1] ?? '').replace(/%([augsUGn])/g, (_m, k: string) => fields[k] ?? '')}\n`)
    }
    return status
  },
  rm: async c => {
    const force = c.args.some(a => /^-[rf]*f/.test(a))
    let status = 0
    for (const a of c.args.filter(x => !x.startsWith('-'))) {
      if (!await c.shell.host.fs.remove(c.shell.path(a)) && !force) { c.err(`rm: cannot remove '${a}': No such file or directory\n`); status = 1 }
    }
    return status
  },
  mkdir: async c => {
    for (const a of c.args.filter(x => !x.startsWith('-'))) await c.shell.host.fs.mkdir(c.shell.path(a))
    return 0
  },
  touch: async c => {
    for (const a of c.args) {
      const p = c.shell.path(a)
      if (await c.shell.host.fs.read(p) === null) await c.shell.host.fs.write(p, Buffer.alloc(0), { append: false, uid: c.shell.uid(), gid: c.shell.uid() })
    }
    return 0
  },
  trap: async c => {
    const [script = '', ...signals] = c.args
    for (const s of signals) {
      if (!SIGNAL_NAMES.has(s as ExecSignal)) { c.err(`trap: ${s}: bad trap\n`); return 1 }
      c.shell.io.trap(s as ExecSignal, async () => {
        try { await c.shell.run(script) } catch (e) { if (e instanceof Exit) return e.code; throw e }
        return undefined
      })
    }
    return 0
  },
  pkill: async c => {
    if (c.args[0] !== '-f' || c.args[1] === undefined) { c.err('pkill: only -f PATTERN\n'); return 2 }
    const re = new RegExp(c.args[1])
    const hits = c.shell.host.processes().filter(p => re.test(p.commandLine))
    await Promise.all(hits.map(async p => { await p.signal('TERM') }))
    return hits.length > 0 ? 0 : 1
  },
  sh: async c => await nested(c),
  bash: async c => await nested(c)
}

/** `sh -c script [name args…]` inside a script: a child shell with the same output. */
async function nested (c: Invocation): Promise<number> {
  if (c.args[0] !== '-c' || c.args[1] === undefined) { c.err('sh: only -c SCRIPT\n'); return 2 }
  const io = c.stdin === undefined ? c.shell.io : withInput(c.shell.io, c.stdin)
  const child = c.shell.child(c.args.slice(2), io)
  try { return await child.run(c.args[1], c.out, c.err) } catch (e) { if (e instanceof Exit) return e.code; throw e }
}

/** The io of a process whose stdin is `data` (a redirection). */
function withInput (io: ProgramIo, data: Buffer): ProgramIo {
  const lines = data.toString('utf8').split('\n')
  if (lines[lines.length - 1] === '') lines.pop()
  return { ...io, input: async () => data, line: async () => lines.shift() ?? null }
}
