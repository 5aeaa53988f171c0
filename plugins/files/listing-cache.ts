/*
 * Single flight plus a short cache for serialised listings: N concurrent or quickly repeated listings of
 * one chat cost one walk. Entries live `ttlMs`, or twice as long as their walk took when that is longer,
 * so a chat whose walk is expensive spends at most a third of the wall clock walking. The cache is bounded
 * by bytes across chats (least recently used out first); a failed walk is not cached.
 */

export interface Produced {
  body: Buffer
  /** Milliseconds the walk took (stretches the entry's lifetime). */
  costMs: number
}

export interface ListingCacheOptions {
  ttlMs: number
  maxBytes: number
  now?: () => number
}

export interface ListingCache {
  /** The cached body, the body of the walk already running for `key`, or the result of a new `produce()`. */
  get: (key: string, produce: () => Promise<Produced>) => Promise<Buffer>
  /** Bytes held by finished entries. */
  readonly bytes: number
}

interface Entry { body: Buffer, expires: number }

export function createListingCache (opts: ListingCacheOptions): ListingCache {
  const now = opts.now ?? Date.now
  // Map order is recency order: a hit moves its key to the end, eviction takes from the front.
  const done = new Map<string, Entry>()
  const running = new Map<string, Promise<Buffer>>()
  let bytes = 0

  function drop (key: string): void {
    const entry = done.get(key)
    if (entry === undefined) return
    bytes -= entry.body.length
    done.delete(key)
  }

  function store (key: string, { body, costMs }: Produced): void {
    drop(key)
    if (opts.ttlMs <= 0 || body.length > opts.maxBytes) return
    const at = now()
    for (const [k, e] of done) if (e.expires <= at) drop(k)
    for (const k of done.keys()) {
      if (bytes + body.length <= opts.maxBytes) break
      drop(k)
    }
    done.set(key, { body, expires: at + Math.max(opts.ttlMs, 2 * costMs) })
    bytes += body.length
  }

  return {
    async get (key, produce) {
      const hit = done.get(key)
      if (hit !== undefined) {
        done.delete(key)
        if (hit.expires > now()) {
          done.set(key, hit)
          return hit.body
        }
        bytes -= hit.body.length
      }
      const inFlight = running.get(key)
      if (inFlight !== undefined) return await inFlight
      const started = produce().then(produced => { store(key, produced); return produced.body })
      running.set(key, started)
      try {
        return await started
      } finally {
        running.delete(key)
      }
    },
    get bytes () { return bytes }
  }
}
