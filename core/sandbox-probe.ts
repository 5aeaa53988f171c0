import type { Duplex } from 'node:stream'

/*
 * Short helper commands in a running sandbox that must not count as activity (docs/contract.md#idle-stop-max-age-and-purge:
 * status, processes and sessions polls never keep a sandbox alive): the sandbox service's exec()
 * records activity, so probes run over its openStream() without a lease. Output is untrusted: at most
 * `maxBytes` of stdout is kept, stderr is dropped, a stuck command is abandoned after `timeoutMs`, and
 * each probe's semaphore bounds how many run at once. Shared by the terminal (tmux) and the sub-agent
 * (the CLI's sessions and processes); the stream types are structural, so core imports no plugin.
 */

/** What a probe needs of a sandbox stream (the sandbox service's SandboxStream is one). */
export interface ProbeStream {
  socket: Duplex
  demux (onStdout: (data: Buffer) => void): void
  close (): void
}

/** The sandbox service's openStream(), as a probe calls it. */
export type OpenProbeStream = (chatId: string, argv: string[], opts: { user: string, cwd: string, tty: false, env?: Record<string, string> }) => Promise<ProbeStream>

export interface ProbeOptions {
  /** default 'assistant' */
  user?: string
  env?: Record<string, string>
  timeoutMs: number
  maxBytes: number
}

/** Resolves the command's stdout (at most maxBytes); rejects with the stream's error or the timeout's. */
export type Probe = (chatId: string, argv: string[], opts: ProbeOptions) => Promise<Buffer>

/** A counting semaphore: `run(fn)` waits for a free slot. */
export function createLimiter (slots: number): <T>(fn: () => Promise<T>) => Promise<T> {
  let free = slots
  const waiting: Array<() => void> = []
  return async fn => {
    if (free > 0) free--
    else await new Promise<void>(resolve => waiting.push(resolve))
    try {
      return await fn()
    } finally {
      const next = waiting.shift()
      if (next !== undefined) next()
      else free++
    }
  }
}

/** Collects a started stream's stdout up to maxBytes, until it ends or the timeout fires. */
function collect (stream: ProbeStream, opts: ProbeOptions, timeoutError: () => Error): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = []
    let kept = 0
    let settled = false
    const finish = (err?: Error): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      stream.close()
      if (err !== undefined) reject(err)
      else resolve(Buffer.concat(chunks, kept))
    }
    const timer = setTimeout(() => finish(timeoutError()), opts.timeoutMs)
    stream.demux(data => {
      if (settled) return
      const room = opts.maxBytes - kept
      if (data.length <= room) { chunks.push(Buffer.from(data)); kept += data.length; return }
      if (room > 0) { chunks.push(Buffer.from(data.subarray(0, room))); kept += room }
      finish()
    })
    stream.socket.once('close', () => finish())
    stream.socket.once('end', () => finish())
    stream.socket.on('error', () => finish())
    // The command gets EOF on stdin at once: probes never read it.
    stream.socket.end()
  })
}

/**
 * A probe over `openStream` with `slots` at once. `name` is for the error when the sandbox driver has
 * no openStream(); `timeoutError` makes the caller's coded error for a stuck command.
 */
export function createProbe (openStream: OpenProbeStream | undefined, slots: number, name: string, timeoutError: () => Error): Probe {
  if (openStream === undefined) throw new TypeError(`${name}: the sandbox driver has no openStream()`)
  const limit = createLimiter(slots)
  return async (chatId, argv, opts) => await limit(async () => {
    const stream = await openStream(chatId, argv, { user: opts.user ?? 'assistant', cwd: '/', tty: false, ...(opts.env === undefined ? {} : { env: opts.env }) })
    return await collect(stream, opts, timeoutError)
  })
}
