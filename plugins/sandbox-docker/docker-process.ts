import { Readable, type Duplex, type Writable } from 'node:stream'
import type { ExecExit, ExecProcess, ExecSignal } from '../sandbox/types.js'
import { Demuxer, STDERR } from './docker-stream.js'

/*
 * A Docker exec as the engine contract's process (engine-types.ts ExecProcess): the hijacked
 * connection is demultiplexed into stdout and stderr (Docker's attach framing, or raw bytes with a
 * TTY); a reader that stops reading pauses the connection, so dockerd stops copying the process's
 * pipes and the process blocks on a full pipe. Docker reports an exec's status separately from its
 * stream, and for a moment after the stream ended it may still say "running": `exit` polls briefly.
 * A process Docker never started shows pid 0; its stream then holds dockerd's reason, not the sandbox's
 * output. It is `notRunning` when the container had ended (killed while the exec was set up): the reason
 * says so, or the container is found not running within NOT_RUNNING_CHECKS (dockerd marks it a moment
 * after its task ended). A start refused for a missing executable (exit 127) is not asked about.
 */

/** What the process needs of the adapter. */
export interface DockerExecOps {
  /** the exec's id (dockerd names it when the exec was removed with its container before it started) */
  id: string
  inspect: () => Promise<{ running: boolean, exitCode: number | null, pid: number }>
  /** whether the exec's container runs (false when it is gone) */
  containerRunning: () => Promise<boolean>
  resize: (cols: number, rows: number) => Promise<void>
  signal: (signal: ExecSignal) => Promise<void>
}

/** Polls after the stream ended: Docker may report the exec as running for a moment longer. */
const EXIT_POLLS = 20
/** dockerd's words (runc, containerd) for an exec refused because the container's task had ended. */
const NOT_RUNNING = /cannot exec in a (?:stopped|deleted) (?:state|container)|task [0-9a-f]{1,64} not found|is not running|namespace path: lstat \/proc\/[0-9]{1,10}\/ns\//
/** The bytes of the stream kept to read that reason (dockerd's message is one line). */
const REASON_BYTES = 512
/** Looks at the container after another refused start, while it is still reported running (0.5 s). */
const NOT_RUNNING_CHECKS = 5
const NOT_RUNNING_CHECK_MS = 100
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
  /** the stream's first bytes: dockerd's reason when the process never started */
  private head = ''

  constructor (private readonly socket: Duplex, tty: boolean, stdin: boolean, private readonly ops: DockerExecOps) {
    this.stdin = stdin ? socket : null
    const resume = (): void => { if (!socket.destroyed && socket.isPaused()) socket.resume() }
    this.stdout = new Output(resume)
    this.stderr = new Output(resume)
    this.exit = new Promise(resolve => { this.settle = resolve })
    const hand = (stream: number, data: Buffer): void => {
      // A reader may close the process while a chunk's frames are handed on.
      if (this.ended) return
      if (this.head.length < REASON_BYTES) this.head += data.subarray(0, REASON_BYTES - this.head.length).toString('latin1')
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
      let s: Awaited<ReturnType<DockerExecOps['inspect']>>
      try {
        s = await this.ops.inspect()
      } catch {
        // The exec went with its container before it started: dockerd's answer to the start, the stream's only line.
        const gone = this.head === `No such exec instance: ${this.ops.id}\r\n`
        return gone ? { code: null, notStarted: true, notRunning: true } : { code: null, notStarted: false }
      }
      if (!s.running) {
        if (s.pid !== 0) return { code: s.exitCode, notStarted: false }
        return await this.refusedNotRunning(s.exitCode) ? { code: s.exitCode, notStarted: true, notRunning: true } : { code: s.exitCode, notStarted: true }
      }
      if (i + 1 < tries) await sleep(i < 5 ? 5 : 25)
    }
    return { code: null, notStarted: false }
  }

  /** A start Docker refused (pid 0): because the container had ended? */
  private async refusedNotRunning (code: number | null): Promise<boolean> {
    if (NOT_RUNNING.test(this.head)) return true
    if (code === 127) return false
    for (let i = 0; i < NOT_RUNNING_CHECKS; i++) {
      if (!await this.ops.containerRunning().catch(() => true)) return true
      if (i + 1 < NOT_RUNNING_CHECKS) await sleep(NOT_RUNNING_CHECK_MS)
    }
    return false
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
