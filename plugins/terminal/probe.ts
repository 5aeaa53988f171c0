import type { SandboxService } from '../sandbox-docker/types.js'
import { TERMINAL_SANDBOX_TIMEOUT } from './errors.js'

/*
 * Short commands in a running sandbox that must not count as activity (surface.md §5.6 item 3:
 * status, processes and sessions polls never keep a sandbox alive). The sandbox service's exec()
 * records activity, so probes run over openStream() without a lease instead. Output is untrusted:
 * at most `maxBytes` of stdout is kept, stderr is dropped, and a stuck command is abandoned after
 * `timeoutMs`. A server-wide limiter bounds how many run at once.
 */

export interface ProbeOptions {
  /** default 'assistant' */
  user?: string
  env?: Record<string, string>
  timeoutMs: number
  maxBytes: number
}

export interface ProbeResult { stdout: Buffer, truncated: boolean }

export type Probe = (chatId: string, argv: string[], opts: ProbeOptions) => Promise<ProbeResult>

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

export function createProbe (sandbox: Pick<SandboxService, 'openStream'>, slots: number): Probe {
  const { openStream } = sandbox
  if (openStream === undefined) throw new TypeError('terminal: the sandbox driver has no openStream()')
  const limit = createLimiter(slots)
  return async (chatId, argv, opts) => await limit(async () => {
    const stream = await openStream(chatId, argv, { user: opts.user ?? 'assistant', cwd: '/', tty: false, ...(opts.env === undefined ? {} : { env: opts.env }) })
    return await new Promise<ProbeResult>((resolve, reject) => {
      const chunks: Buffer[] = []
      let kept = 0
      let truncated = false
      let settled = false
      const finish = (err?: Error): void => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        stream.close()
        if (err !== undefined) reject(err)
        else resolve({ stdout: Buffer.concat(chunks, kept), truncated })
      }
      const timer = setTimeout(() => finish(new TERMINAL_SANDBOX_TIMEOUT()), opts.timeoutMs)
      stream.demux(data => {
        if (settled) return
        const room = opts.maxBytes - kept
        if (data.length <= room) { chunks.push(Buffer.from(data)); kept += data.length; return }
        if (room > 0) { chunks.push(Buffer.from(data.subarray(0, room))); kept += room }
        truncated = true
        finish()
      })
      stream.socket.once('close', () => finish())
      stream.socket.once('end', () => finish())
      stream.socket.on('error', () => finish())
      // The command gets EOF on stdin at once: probes never read it.
      stream.socket.end()
    })
  })
}
