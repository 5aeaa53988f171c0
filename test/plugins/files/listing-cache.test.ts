// N listings of one chat cost one walk; the cache is short-lived and bounded by bytes.
import t from 'tap'
import { createListingCache, type Produced } from '../../../plugins/files/listing-cache.js'

function clock (): { now: () => number, advance: (ms: number) => void } {
  let at = 1_000_000
  return { now: () => at, advance: ms => { at += ms } }
}

function deferred (): { promise: Promise<Produced>, resolve: (p: Produced) => void, reject: (err: Error) => void } {
  let resolve!: (p: Produced) => void
  let reject!: (err: Error) => void
  const promise = new Promise<Produced>((_resolve, _reject) => { resolve = _resolve; reject = _reject })
  return { promise, resolve, reject }
}

t.test('concurrent gets for one key share one produce call and one buffer', async t => {
  const cache = createListingCache({ ttlMs: 0, maxBytes: 1 << 20 })
  let calls = 0
  const walk = deferred()
  const produce = async (): Promise<Produced> => { calls++; return await walk.promise }
  const gets = Array.from({ length: 100 }, async () => await cache.get('chat-a', produce))
  const other = cache.get('chat-b', async () => { calls++; return { body: Buffer.from('b'), costMs: 0 } })
  walk.resolve({ body: Buffer.from('listing a'), costMs: 5 })
  const bodies = await Promise.all(gets)
  t.equal(calls, 2, 'one walk for the 100 gets of chat-a, one for chat-b')
  t.ok(bodies.every(b => b === bodies[0]), 'every waiter got the same buffer object')
  t.equal((await other).toString(), 'b')
  await cache.get('chat-a', produce)
  t.equal(calls, 3, 'ttl 0: single flight only, a later get walks again')
})

t.test('a finished listing is reused for ttlMs, or twice its walk time when longer', async t => {
  const { now, advance } = clock()
  const cache = createListingCache({ ttlMs: 2000, maxBytes: 1 << 20, now })
  let calls = 0
  const produce = (costMs: number) => async (): Promise<Produced> => { calls++; return { body: Buffer.from(`v${calls}`), costMs } }
  t.equal((await cache.get('a', produce(10))).toString(), 'v1')
  advance(1999)
  t.equal((await cache.get('a', produce(10))).toString(), 'v1', 'still fresh')
  advance(1)
  t.equal((await cache.get('a', produce(3000))).toString(), 'v2', 'expired after ttlMs')
  advance(5999)
  t.equal((await cache.get('a', produce(10))).toString(), 'v2', 'a 3 s walk is reused for 6 s')
  advance(1)
  t.equal((await cache.get('a', produce(10))).toString(), 'v3')
})

t.test('a failed walk rejects every waiter and is not cached', async t => {
  const cache = createListingCache({ ttlMs: 60_000, maxBytes: 1 << 20 })
  const walk = deferred()
  let calls = 0
  const failing = async (): Promise<Produced> => { calls++; return await walk.promise }
  const a = cache.get('a', failing)
  const b = cache.get('a', failing)
  walk.reject(new Error('busy'))
  await t.rejects(a, /busy/)
  await t.rejects(b, /busy/)
  t.equal(calls, 1)
  t.equal((await cache.get('a', async () => ({ body: Buffer.from('ok'), costMs: 0 }))).toString(), 'ok', 'the next get walks again')
})

t.test('bounded by bytes: least recently used chats go first; an oversized body is not cached', async t => {
  const cache = createListingCache({ ttlMs: 60_000, maxBytes: 300 })
  const body = (c: string, n = 100): (() => Promise<Produced>) => async () => ({ body: Buffer.alloc(n, c), costMs: 0 })
  await cache.get('a', body('a'))
  await cache.get('b', body('b'))
  await cache.get('c', body('c'))
  t.equal(cache.bytes, 300)
  await cache.get('a', body('x')) // a hit: a becomes most recent
  await cache.get('d', body('d'))
  t.equal(cache.bytes, 300, 'never above maxBytes')
  t.equal((await cache.get('b', body('B'))).toString()[0], 'B', 'b (least recent) was evicted')
  t.equal((await cache.get('a', body('y'))).toString()[0], 'a', 'a survived')
  await cache.get('huge', body('h', 301))
  t.ok(cache.bytes <= 300)
  t.equal((await cache.get('huge', body('H', 301))).toString()[0], 'H', 'not cached')
})
