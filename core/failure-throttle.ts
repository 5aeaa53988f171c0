import { isIPv4, isIPv6 } from 'node:net'

/*
 * Counts failed authentication attempts per client address in fixed one-minute windows
 * (docs/contract.md#authentication-and-origin). Only failures are counted, and the caller checks the credential
 * first, so a valid credential is never refused however many failures its address has.
 */

export interface FailureThrottleOptions {
  /** Failures per address and window that are still answered normally; the next ones get 429. */
  limit: number
  /** Injectable clock (ms). */
  now: () => number
  /** Bound on tracked addresses; when reached the window starts over (memory stays bounded). */
  maxAddresses?: number
}

export interface FailureVerdict {
  /** True when this failure is over the limit: answer 429. */
  throttled: boolean
  /** True for the first throttled failure of this address in this window (log it once). */
  firstThrottled: boolean
  /** Seconds until the window ends (1–60), for Retry-After. */
  retryAfter: number
}

export interface FailureThrottle {
  /** Records one failure of `address` and says whether it is over the limit. */
  fail (address: string): FailureVerdict
}

const WINDOW_MS = 60_000

/** Expands an IPv6 address (no zone) to its eight 16-bit groups; null when it is not one. */
function ipv6Groups (address: string): number[] | null {
  let text = address
  const tail: number[] = []
  const lastColon = text.lastIndexOf(':')
  if (isIPv4(text.slice(lastColon + 1))) {
    const [a, b, c, d] = text.slice(lastColon + 1).split('.').map(Number) as [number, number, number, number]
    tail.push((a << 8) | b, (c << 8) | d)
    text = `${text.slice(0, lastColon + 1)}0`
  }
  const [head, rest] = text.split('::') as [string, string | undefined]
  const left = head === '' ? [] : head.split(':')
  const right = rest === undefined || rest === '' ? [] : rest.split(':')
  const fill = 8 - (tail.length > 0 ? 1 : 0) - left.length - right.length
  const groups = [...left, ...Array<string>(rest === undefined ? 0 : fill).fill('0'), ...right].map(h => parseInt(h, 16))
  if (tail.length > 0) groups.pop()
  groups.push(...tail)
  return groups.length === 8 ? groups : null
}

/**
 * The key an address is counted under: IPv4 (also IPv4-mapped IPv6) as is, IPv6 by its /64
 * prefix, since one subscriber usually holds a whole /64 and could otherwise rotate addresses.
 */
export function throttleKey (address: string): string {
  const bare = address.replace(/%.*$/, '')
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(bare)
  if (mapped !== null) return mapped[1] as string
  if (!isIPv6(bare)) return bare
  const groups = ipv6Groups(bare)
  return groups === null ? bare : `${groups.slice(0, 4).map(g => g.toString(16)).join(':')}::/64`
}

export function createFailureThrottle (opts: FailureThrottleOptions): FailureThrottle {
  const maxAddresses = opts.maxAddresses ?? 100_000
  let window = Math.floor(opts.now() / WINDOW_MS)
  let failures = new Map<string, number>()
  return {
    fail (address) {
      const now = opts.now()
      const current = Math.floor(now / WINDOW_MS)
      const key = throttleKey(address)
      if (current !== window || (failures.size >= maxAddresses && !failures.has(key))) { window = current; failures = new Map() }
      const count = (failures.get(key) ?? 0) + 1
      failures.set(key, count)
      const retryAfter = Math.max(1, Math.ceil(((current + 1) * WINDOW_MS - now) / 1000))
      return { throttled: count > opts.limit, firstThrottled: count === opts.limit + 1, retryAfter }
    }
  }
}
