import { Readable, Writable } from 'node:stream'
import type { ExecExit, ExecProcess, ExecSignal } from '../sandbox/types.js'

/*
 * A process of the in-memory engine: a program (an async function) that writes to stdout/stderr,
 * reads stdin, and is told of signals; the process resolves with the program's status. Output is
 * pushed as the program writes (a reader that pauses only lets it accumulate: programs here print
 * little). Signals without a handler end the program as a shell's child would: 128 + the number.
 */

export const SIGNALS: Record<ExecSignal, number> = { HUP: 1, INT: 2, KILL: 9, TERM: 15 }

/** What a program sees of its process. */
export interface ProgramIo {
  argv: string[]
  env: Record<string, string>
  cwd: string
  user: string
  tty: boolean
  /** the terminal's size (24x80 until resized) */
  size: () => { cols: number, rows: number }
  out: (text: string | Buffer) => void
  err: (text: string | Buffer) => void
  /** the whole of stdin (resolves when it is closed; '' without stdin) */
  input: () => Promise<Buffer>
  /** the next line of stdin without its newline; null at its end */
  line: () => Promise<string | null>
  /** a handler for `signal` (resolves with the exit status to end with, or undefined to go on); the default ends the program */
  trap: (signal: ExecSignal, handler: () => Promise<number | undefined>) => void
  /** rejects when a signal ended the program: race long waits against it */
  killed: Promise<never>
}

export type Program = (io: ProgramIo) => Promise<number>

class Output extends Readable {
  override _read (): void {}
}

export interface MemoryProcessOptions {
  argv: string[]
  env: Record<string, string>
  cwd: string
  user: string
  tty: boolean
  stdin: boolean
  /** false: the process never starts (the sandbox has no process left); it ends without a status */
  startable?: boolean
}

export class MemoryProcess implements ExecProcess {
  readonly stdin: Writable | null
  readonly stdout = new Output()
  readonly stderr = new Output()
  readonly exit: Promise<ExecExit>
  private settle!: (exit: ExecExit) => void
  private done = false
  private readonly input: Buffer[] = []
  private inputEnded: boolean
  private readonly inputWaiters: Array<() => void> = []
  private cols = 80
  private rows = 24
  private readonly traps = new Map<ExecSignal, () => Promise<number | undefined>>()
  private kill!: (code: number) => void
  private readonly running: boolean

  /** `onEnd` runs once the process ended (the engine forgets it). */
  constructor (private readonly o: MemoryProcessOptions, program: Program, private readonly onEnd: () => void = () => {}) {
    this.exit = new Promise(resolve => { this.settle = resolve })
    this.inputEnded = !o.stdin
    this.stdin = o.stdin
      ? new Writable({
        write: (chunk: Buffer, _enc, done) => { this.input.push(Buffer.from(chunk)); this.wake(); done() },
        final: done => { this.inputEnded = true; this.wake(); done() }
      })
      : null
    this.running = o.startable !== false
    if (!this.running) return
    const killed = new Promise<never>((_resolve, reject) => { this.kill = code => { reject(new Killed(code)); this.finish(code) } })
    killed.catch(() => {})
    queueMicrotask(() => {
      program(this.io(killed)).then(code => { this.finish(code & 255) }, err => {
        if (err instanceof Killed) { this.finish(err.code); return }
        this.stderr.push(`${String((err as Error)?.message ?? err)}\n`)
        this.finish(1)
      })
    })
  }

  private io (killed: Promise<never>): ProgramIo {
    const { argv, env, cwd, user, tty } = this.o
    const write = (to: Output) => (text: string | Buffer): void => {
      if (this.done) return
      // With a TTY everything the program prints is on the one stream.
      (tty ? this.stdout : to).push(typeof text === 'string' ? Buffer.from(text) : text)
    }
    return {
      argv,
      env,
      cwd,
      user,
      tty,
      size: () => ({ cols: this.cols, rows: this.rows }),
      out: write(this.stdout),
      err: write(this.stderr),
      input: async () => {
        while (!this.inputEnded) await this.nextInput()
        return Buffer.concat(this.input.splice(0))
      },
      line: async () => {
        for (;;) {
          const all = Buffer.concat(this.input)
          const nl = all.indexOf(10)
          if (nl !== -1) {
            this.input.splice(0, this.input.length, all.subarray(nl + 1))
            return all.subarray(0, nl).toString('utf8').replace(/\r$/, '')
          }
          if (this.inputEnded) {
            this.input.splice(0)
            return all.length > 0 ? all.toString('utf8') : null
          }
          await this.nextInput()
        }
      },
      trap: (signal, handler) => { this.traps.set(signal, handler) },
      killed
    }
  }

  private async nextInput (): Promise<void> { await new Promise<void>(resolve => { this.inputWaiters.push(resolve) }) }

  private wake (): void { for (const w of this.inputWaiters.splice(0)) w() }

  private finish (code: number | null, notStarted = false): void {
    if (this.done) return
    this.done = true
    this.stdout.push(null)
    this.stderr.push(null)
    this.settle({ code, notStarted })
    this.onEnd()
  }

  async started (): Promise<boolean> { return this.running }

  async resize (cols: number, rows: number): Promise<void> {
    if (!this.o.tty) return
    this.cols = cols
    this.rows = rows
  }

  async signal (signal: ExecSignal): Promise<void> {
    if (this.done || !this.running) return
    const trap = signal === 'KILL' ? undefined : this.traps.get(signal)
    const code = trap === undefined ? 128 + SIGNALS[signal] : await trap()
    if (code !== undefined && !this.done) this.kill(code)
  }

  close (): void {
    // Detached: the program is abandoned (a real process would get EOF or SIGHUP); no status.
    this.finish(null)
    if (this.running) this.kill(128 + SIGNALS.HUP)
  }

  /** The sandbox stopped under it: the output ends without a status. */
  lost (): void {
    this.finish(null)
    if (this.running) this.kill(128 + SIGNALS.KILL)
  }

  /** A process that could not start ends at once, without a status (as a runtime that gave up). */
  giveUp (): void { if (!this.running) this.finish(null, true) }
}

class Killed extends Error {
  constructor (readonly code: number) { super(`killed (${code})`) }
}
