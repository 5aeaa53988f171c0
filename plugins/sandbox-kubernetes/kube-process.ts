import { Readable, Writable } from 'node:stream'
import type WebSocket from 'ws'
import type { ExecExit, ExecProcess, ExecSignal } from '../sandbox/types.js'

/*
 * A pods/exec stream as the engine contract's process (engine-types.ts ExecProcess): the Kubernetes
 * remotecommand protocol over a WebSocket, `v5.channel.k8s.io` (or `v4.channel.k8s.io`). Every binary
 * message starts with its channel: 0 stdin, 1 stdout, 2 stderr, 3 the status (a metav1.Status: Success,
 * or Failure with the exit code in details.causes), 4 a TTY's size, and in v5 255 [channel] to close
 * one (the process's stdin gets EOF). v4 cannot close stdin: the process sees EOF only when the stream
 * ends. A reader that stops reading pauses the socket, so the API server and the kubelet stop copying
 * the process's output and the process blocks on a full pipe.
 */

const STDIN = 0
const STDOUT = 1
const STDERR = 2
const STATUS = 3
const RESIZE = 4
const CLOSE = 255
const MAX_STATUS = 64 * 1024

/** What the runtime says when it could not even start the process (no pids or memory left). */
const NOT_STARTED = /resource temporarily unavailable|cannot allocate memory|fork|too many processes|pids limit/i

export interface ExecOps {
  signal: (signal: ExecSignal) => Promise<void>
}

/** The exit the status message tells: Success 0, NonZeroExitCode its code, any other failure null. */
export function exitOfStatus (payload: Buffer): ExecExit {
  if (payload.length > MAX_STATUS) return { code: null, notStarted: false }
  let s: { status?: unknown, reason?: unknown, message?: unknown, details?: { causes?: Array<{ reason?: unknown, message?: unknown }> } }
  try { s = JSON.parse(payload.toString('utf8')) as typeof s } catch { return { code: null, notStarted: false } }
  if (s.status === 'Success') return { code: 0, notStarted: false }
  const cause = Array.isArray(s.details?.causes) ? s.details.causes.find(c => c.reason === 'ExitCode') : undefined
  const code = cause === undefined ? NaN : Number(cause.message)
  if (Number.isInteger(code) && code >= 0 && code <= 255) return { code, notStarted: false }
  return { code: null, notStarted: typeof s.message === 'string' && NOT_STARTED.test(s.message.slice(0, 1000)) }
}

class Output extends Readable {
  constructor (private readonly onRead: () => void) { super() }
  override _read (): void { this.onRead() }
}

export class KubeProcess implements ExecProcess {
  readonly stdin: Writable | null
  readonly stdout: Output
  readonly stderr: Output
  readonly exit: Promise<ExecExit>
  private settle!: (exit: ExecExit) => void
  private status: ExecExit | undefined
  private ended = false
  private readonly v5: boolean

  /** `preamble` goes first on stdin (kube-wrapper.ts); without `stdin` the channel is closed after it. */
  constructor (private readonly ws: WebSocket, private readonly tty: boolean, stdin: boolean, preamble: Buffer | null, private readonly ops: ExecOps) {
    this.v5 = ws.protocol === 'v5.channel.k8s.io'
    this.exit = new Promise(resolve => { this.settle = resolve })
    const resume = (): void => { if (ws.isPaused) ws.resume() }
    this.stdout = new Output(resume)
    this.stderr = new Output(resume)
    if (preamble !== null) this.send(STDIN, preamble)
    if (stdin) {
      this.stdin = new Writable({
        write: (chunk: Buffer, _enc, done) => { this.send(STDIN, chunk, done) },
        final: done => { if (this.v5) this.sendRaw(Buffer.from([CLOSE, STDIN])); done() }
      })
      this.stdin.on('error', () => {})
    } else {
      this.stdin = null
      if (this.v5) this.sendRaw(Buffer.from([CLOSE, STDIN]))
    }
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (!isBinary || data.length === 0 || this.ended) return
      const ch = data[0]
      const payload = data.subarray(1)
      if (ch === STDOUT || (ch === STDERR && this.tty)) { if (!this.stdout.push(payload)) ws.pause() } else if (ch === STDERR) { if (!this.stderr.push(payload)) ws.pause() } else if (ch === STATUS) this.status = exitOfStatus(payload)
    })
    ws.on('close', () => { this.end() })
    ws.on('error', () => { this.end() })
  }

  private sendRaw (data: Buffer, done?: (err?: Error | null) => void): void {
    if (this.ws.readyState !== this.ws.OPEN) { done?.(); return }
    this.ws.send(data, { binary: true }, () => { done?.() })
  }

  /** Stdin in messages of at most 64 KiB; `done` once the socket took them and its buffer is below 1 MiB (backpressure). */
  private send (channel: number, chunk: Buffer, done?: (err?: Error | null) => void): void {
    const max = 64 * 1024
    for (let at = 0; at < chunk.length || at === 0; at += max) {
      const last = at + max >= chunk.length
      this.sendRaw(Buffer.concat([Buffer.from([channel]), chunk.subarray(at, at + max)]), last ? () => { this.drained(done) } : undefined)
      if (last) break
    }
  }

  private drained (done?: (err?: Error | null) => void): void {
    if (done === undefined) return
    if (this.ended || this.ws.bufferedAmount < 1024 * 1024) { done(); return }
    setTimeout(() => { this.drained(done) }, 10)
  }

  private end (): void {
    if (this.ended) return
    this.ended = true
    this.stdout.push(null)
    this.stderr.push(null)
    this.settle(this.status ?? { code: null, notStarted: false })
  }

  async started (): Promise<boolean> { return await Promise.resolve(this.status?.notStarted !== true) }

  async resize (cols: number, rows: number): Promise<void> {
    if (!this.tty || !Number.isInteger(cols) || !Number.isInteger(rows) || cols <= 0 || rows <= 0) return
    this.sendRaw(Buffer.concat([Buffer.from([RESIZE]), Buffer.from(JSON.stringify({ Width: cols, Height: rows }))]))
    await Promise.resolve()
  }

  async signal (signal: ExecSignal): Promise<void> { await this.ops.signal(signal) }

  close (): void {
    if (this.ended) return
    this.status = undefined
    this.end()
    this.ws.terminate()
  }
}
