import { Readable, type Duplex, type Writable } from 'node:stream'
import type { ExecExit, ExecProcess, ExecSignal } from '../sandbox/types.js'
import { Demuxer, STDERR } from './docker-stream.js'

/*
 * A Docker exec as the engine contract's process (engine-types.ts ExecProcess): the hijacked
 * connection is demultiplexed into stdout and stderr (Docker's attach framing, or raw bytes with a
 * TTY); a reader that stops reading pauses the connection, so dockerd stops copying the process's
 * pipes and the process blocks on a full pipe. Docker reports an exec's status separately from its
 * stream, and for a moment after the stream ended it may still say "running": `exit` polls briefly.
 * A process Docker never started shows pid 0.
 */

/** What the process needs of the adapter. */
export interface DockerExecOps {
  inspect: () => Promise<{ running: boolean, exitCode: number | null, pid: number }>
  resize: (cols: number, rows: number) => Promise<void>
  signal: (signal: ExecSignal) => Promise<void>
}

/** Polls after the stream ended: Docker may report the exec as running for a moment longer. */
const EXIT_POLLS = 20
const sleep = async (ms: number): Promise<void> => await new Promise(resolve => setTimeout(resolve, ms))

/** One output stream of the connection; reading it again resumes the connection. */
class Output extends Readable {
  constructor (private readonly onRead: () => void) { super() }
  override _read (): void { this.onRead() }
}

export class DockerProcess implements ExecProcess {
  readonly stdin: Writable | null
  readonly stdout: Output
  readonly stderr: Output
  readonly exit: Promise<ExecExit>
  private settle!: (exit: ExecExit) => void
  private ended = false
  private closed = false

  constructor (private readonly socket: Duplex, tty: boolean, stdin: boolean, private readonly ops: DockerExecOps) {
    this.stdin = stdin ? socket : null
    const resume = (): void => { if (!socket.destroyed && socket.isPaused()) socket.resume() }
    this.stdout = new Output(resume)
    this.stderr = new Output(resume)
    this.exit = new Promise(resolve => { this.settle = resolve })
    const hand = (stream: number, data: Buffer): void => {
      // A reader may close the process while a chunk's frames are handed on.
      if (this.ended) return
      const to = stream === STDERR ? this.stderr : this.stdout
      if (!to.push(data)) socket.pause()
    }
    const demux = tty ? { push: (chunk: Buffer) => hand(1, chunk) } : new Demuxer(hand)
    socket.on('data', (chunk: Buffer) => demux.push(chunk))
    socket.on('end', () => { this.end(true) })
    socket.on('close', () => { this.end(true) })
    socket.on('error', () => { this.end(false) })
  }

  /** The stream ended (`clean`: not by an error): end both outputs and find out how the process ended. */
  private end (clean: boolean): void {
    if (this.ended) return
    this.ended = true
    this.stdout.push(null)
    this.stderr.push(null)
    if (!this.socket.destroyed) this.socket.destroy()
    if (this.closed) return
    if (!clean) { this.settle({ code: null, notStarted: false }); return }
    void this.poll(EXIT_POLLS).then(this.settle)
  }

  private async poll (tries: number): Promise<ExecExit> {
    for (let i = 0; i < tries; i++) {
      try {
        const s = await this.ops.inspect()
        if (!s.running) return { code: s.exitCode, notStarted: s.pid === 0 }
      } catch { return { code: null, notStarted: false } }
      if (i + 1 < tries) await sleep(i < 5 ? 5 : 25)
    }
    return { code: null, notStarted: false }
  }

  async started (): Promise<boolean> {
    const s = await this.ops.inspect()
    return !(s.running && s.pid === 0)
  }

  async resize (cols: number, rows: number): Promise<void> { await this.ops.resize(cols, rows) }

  async signal (signal: ExecSignal): Promise<void> { await this.ops.signal(signal) }

  close (): void {
    if (this.closed) return
    this.closed = true
    if (this.ended) return
    this.end(true)
    // Closed before the stream ended: one look, no wait (the process may well still run).
    void this.poll(1).then(this.settle)
  }
}
