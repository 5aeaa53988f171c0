import { Duplex, type Readable } from 'node:stream'
import type { ExecProcess } from './engine-types.js'

/*
 * The socket of a long-lived stream (types.ts SandboxStream) over an engine process: writes go to
 * the process's stdin, end() closes it; pause()/resume() hold back and release the process's output
 * (delivered through SandboxStream.demux, never read from this socket); 'close' when the output
 * ended or the stream was closed.
 */
export class ProcessSocket extends Duplex {
  /** demux() attached its readers: before that, resuming would throw output away */
  reading = false

  constructor (private readonly proc: ExecProcess) {
    super({ allowHalfOpen: true })
    proc.stdin?.on('error', err => { this.destroy(err) })
    // Output left unread (paused) never ends: the process's end closes the socket all the same.
    void Promise.race([outputClosed(proc), proc.exit]).then(() => { this.destroy() })
  }

  override _read (): void {}

  override _write (chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    const stdin = this.proc.stdin
    if (stdin === null || stdin.destroyed) { done(); return }
    stdin.write(chunk, err => { done(err ?? null) })
  }

  override _final (done: (err?: Error | null) => void): void {
    this.proc.stdin?.end()
    done()
  }

  override pause (): this {
    this.proc.stdout.pause()
    this.proc.stderr.pause()
    return this
  }

  override resume (): this {
    if (this.reading) {
      this.proc.stdout.resume()
      this.proc.stderr.resume()
    }
    return this
  }

  override _destroy (err: Error | null, done: (err?: Error | null) => void): void {
    this.proc.close()
    done(err)
  }
}

/** Resolves once both output streams of `proc` closed (read to their end, or destroyed). */
export async function outputClosed (proc: ExecProcess): Promise<void> {
  const closed = async (r: Readable): Promise<void> => { if (!r.destroyed) await new Promise(resolve => r.once('close', resolve)) }
  await Promise.all([closed(proc.stdout), closed(proc.stderr)])
}
