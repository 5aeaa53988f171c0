import { Transform } from 'node:stream'

/*
 * Per-chat bandwidth cap: one token bucket per chat shared by all its connections and both
 * directions (burst = one second's worth). A chunk that overdraws the bucket is released after the
 * debt is repaid, so a chat's throughput converges to the rate while piping keeps its backpressure.
 */

export interface RateLimiter {
  /** A pass-through stream charging the chat's bucket; plain pass-through when unlimited. */
  stream: (chatId: string) => Transform
  /** drops a chat's bucket once it has no connection left */
  release: (chatId: string) => void
}

export function createRateLimiter (bytesPerSecond: number, now: () => number = Date.now): RateLimiter {
  const buckets = new Map<string, { tokens: number, at: number }>()
  const take = (chatId: string, n: number): number => {
    const t = now()
    const b = buckets.get(chatId) ?? { tokens: bytesPerSecond, at: t }
    b.tokens = Math.min(bytesPerSecond, b.tokens + (t - b.at) * bytesPerSecond / 1000) - n
    b.at = t
    buckets.set(chatId, b)
    return b.tokens >= 0 ? 0 : Math.ceil(-b.tokens * 1000 / bytesPerSecond)
  }
  return {
    stream: chatId => new Transform({
      transform (chunk: Buffer, _enc, cb) {
        const wait = bytesPerSecond > 0 ? take(chatId, chunk.length) : 0
        if (wait === 0) cb(null, chunk)
        else setTimeout(() => { cb(null, chunk) }, wait)
      }
    }),
    release: chatId => { buckets.delete(chatId) }
  }
}
