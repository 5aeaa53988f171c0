import type { SandboxService } from '../sandbox-docker/types.js'

/*
 * Short helper commands in a running sandbox that must not count as activity (surface.md §5.6 item
 * 3: sessions and processes polls never keep a sandbox alive). The sandbox's exec() holds a lease
 * (activity), so probes run over openStream() without one. Output is untrusted: at most `maxBytes`
 * of stdout is kept, stderr is dropped, a stuck command is abandoned after `timeoutMs`, and a
 * server-wide limit bounds how many run at once.
 */

export interface ProbeOptions { timeoutMs: number, maxBytes: number }
export type Probe = (chatId: string, argv: string[], opts: ProbeOptions) => Promise<Buffer>

export class ProbeTimeout extends Error {
  constructor () { super('sandbox helper command timed out') }
}

export function createProbe (sandbox: Pick<SandboxService, 'openStream'>, slots = 4): Probe {
  const openStream = sandbox.openStream
  if (openStream === undefined) throw new TypeError('sub-agent: the sandbox driver has no openStream()')
  let free = slots
  const waiting: Array<() => void> = []
  const acquire = async (): Promise<void> => { if (free > 0) free--; else await new Promise<void>(resolve => waiting.push(resolve)) }
  const release = (): void => { const next = waiting.shift(); if (next !== undefined) next(); else free++ }

  return async (chatId, argv, opts) => {
    await acquire()
    try {
      const stream = await openStream(chatId, argv, { user: 'assistant', cwd: '/', tty: false })
      return await new Promise<Buffer>((resolve, reject) => {
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
        const timer = setTimeout(() => finish(new ProbeTimeout()), opts.timeoutMs)
        stream.demux(data => {
          if (settled) return
          const room = opts.maxBytes - kept
          if (data.length <= room) { chunks.push(Buffer.from(data)); kept += data.length; return }
          if (room > 0) { chunks.push(Buffer.from(data.subarray(0, room))); kept += room }
          finish()
        })
        stream.socket.once('end', () => finish())
        stream.socket.once('close', () => finish())
        stream.socket.on('error', () => finish())
        // Probes never read stdin: EOF at once.
        stream.socket.end()
      })
    } finally {
      release()
    }
  }
}
