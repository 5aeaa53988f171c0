/*
 * Backpressure in front of the engine without an engine: the classification of failures
 * (gone vs busy vs answered), the lanes' order, bound, deadline and cancellation, the sharing of
 * identical reads, and run()'s retries within the caller's budget (over a fake dockerode: pure logic).
 */
import t from 'tap'
import type Docker from 'dockerode'
import { adapterContext, DEFAULT_ENGINE_LIMITS } from '../../../plugins/sandbox-docker/docker-context.js'
import { DockerError, failureKind, toDockerError, transient } from '../../../plugins/sandbox-docker/docker-error.js'
import { Dedup, Lane } from '../../../plugins/sandbox-docker/engine-queue.js'
import { mapError } from '../../../plugins/sandbox/context.js'

// What node's http.request rejects with when its signal fires (docker-modem passes the signal on).
const sleep = async (ms: number): Promise<void> => await new Promise(resolve => setTimeout(resolve, ms))
const coded = (code: string): Error => Object.assign(new Error(`connect ${code}`), { code })
const status = (statusCode: number, message: string): Error => Object.assign(new Error(message), { statusCode, json: { message } })
const timeout = (): Error => Object.assign(new Error('The operation was aborted due to timeout'), { name: 'TimeoutError', code: 23 })

t.test('classification: gone, cut off, answered', async t => {
  // a timeout while dockerd answers others was reported as "not reachable"
  t.equal(failureKind(coded('ECONNREFUSED')), 'unreachable')
  t.equal(failureKind(coded('ENOENT')), 'unreachable')
  t.equal(failureKind(status(502, 'bad gateway')), 'unreachable', 'a proxy in front of a dead daemon')
  t.equal(failureKind(status(503, 'unavailable')), 'unreachable')
  t.equal(failureKind(timeout()), 'cut-off')
  t.equal(failureKind(coded('ECONNRESET')), 'cut-off')
  t.equal(failureKind(new Error('socket hang up')), 'cut-off')
  t.equal(failureKind(status(404, 'No such container: x')), 'status')
  t.equal(failureKind(status(500, 'oci runtime error')), 'status')

  const slow = toDockerError(timeout(), 'container start', true)
  t.ok(slow.busy, 'timed out while the engine answers others: busy')
  t.notOk(slow.unavailable)
  const silent = toDockerError(timeout(), 'container start', false)
  t.ok(silent.unavailable, 'timed out and the engine answers nobody: gone')
  t.notOk(silent.busy)
  const refused = toDockerError(coded('ECONNREFUSED'), 'ping', true)
  t.ok(refused.unavailable, 'refused is gone even right after an answer')
  t.notOk(refused.busy)
  const deadline = toDockerError(status(500, 'context deadline exceeded'), 'container create', true)
  t.ok(deadline.busy, "dockerd's own timeout is busy")
  t.equal(deadline.statusCode, 500)
  const fault = toDockerError(status(500, 'oci runtime create failed: bad mount'), 'container create', true)
  t.notOk(fault.busy)
  t.notOk(fault.unavailable)
  t.ok(transient(slow))
  t.ok(transient(silent))
  t.notOk(transient(fault))
  t.notOk(transient(new Error('x')))
})

t.test('mapError: busy is a clear retriable error, never internal or "not reachable"', async t => {
  const status = { closed: false, engineUp: true as boolean | null, bootstrapped: true }
  const reg = { status, engine: { label: { engine: 'the Docker engine', host: 'Docker' } }, log: { error () {}, warn () {} } } as never
  const busy = mapError(reg, toDockerError(timeout(), 'exec create', true)) as Error & { code: string, statusCode: number }
  t.equal(busy.code, 'SANDBOX_ENGINE_BUSY')
  t.equal(busy.statusCode, 503)
  t.match(busy.message, /busy/)
  t.match(busy.message, /again in a moment/)
  t.notMatch(busy.message, /Docker|reachable|internal/i, 'engine-neutral')
  t.equal(status.engineUp, true, 'a busy engine is still up')
  const gone = mapError(reg, toDockerError(coded('ECONNREFUSED'), 'ping')) as Error & { code: string }
  t.equal(gone.code, 'SANDBOX_ENGINE_UNAVAILABLE')
  t.equal(gone.message, 'the Docker engine is not reachable; try again shortly', 'the words users saw before the neutral code')
  t.equal(status.engineUp, false)
})

t.test('a lane admits N at once, in order of arrival', async t => {
  const lane = new Lane('test', 2, 10_000)
  const order: number[] = []
  const releases: Array<() => void> = []
  const waits = [0, 1, 2, 3, 4].map(async i => { const r = await lane.acquire(); order.push(i); releases.push(r) })
  await sleep(10)
  t.same(order, [0, 1], 'two slots')
  t.equal(lane.active, 2)
  t.equal(lane.waiting, 3)
  releases.shift()!()
  await sleep(5)
  t.same(order, [0, 1, 2], 'one out, the oldest waiter in')
  releases.shift()!()
  releases.shift()!()
  await sleep(5)
  t.same(order, [0, 1, 2, 3, 4])
  releases.splice(0).forEach(r => { r(); r() })
  await Promise.all(waits)
  t.equal(lane.active, 0, 'a double release counts once')
  t.equal(lane.waiting, 0)
})

t.test('a lane wait counts toward the deadline and respects cancellation', async t => {
  const lane = new Lane('exec', 1, 10_000)
  const hold = await lane.acquire()
  const t0 = Date.now()
  const late = await lane.acquire({ deadline: Date.now() + 80 }).then(() => null, (err: unknown) => err)
  t.ok(late instanceof DockerError && late.busy, 'deadline passed while queued: busy')
  t.ok(Date.now() - t0 >= 70, 'it waited until the deadline')
  t.match((late as Error).message, /waited .* behind 1 engine requests/)
  const ac = new AbortController()
  const cancelled = lane.acquire({ signal: ac.signal }).then(() => null, (err: unknown) => err)
  await sleep(5)
  t.equal(lane.waiting, 1)
  ac.abort()
  const err = await cancelled
  t.ok(err instanceof DockerError && err.busy)
  t.match((err as Error).message, /cancelled/)
  t.equal(lane.waiting, 0, 'a cancelled waiter leaves the queue')
  await t.rejects(lane.acquire({ signal: AbortSignal.abort() }), /cancelled/, 'already aborted: refused at once')
  hold()
  const next = await lane.acquire({ deadline: Date.now() + 50 })
  t.equal(lane.active, 1, 'the slot went to the next live waiter')
  next()
})

t.test('identical reads in flight are shared', async t => {
  const d = new Dedup()
  let calls = 0
  const fn = async (): Promise<number> => { calls++; await sleep(20); return calls }
  const all = await Promise.all(Array.from({ length: 50 }, async () => await d.run('inspect:x', fn)))
  t.equal(calls, 1, '50 callers, one request')
  t.ok(all.every(v => v === 1))
  t.equal(d.size, 0)
  await d.run('inspect:x', fn)
  t.equal(calls, 2, 'the next read after it settled runs again')
  await t.rejects(d.run('k', async () => { throw new Error('boom') }), /boom/)
  t.equal(d.size, 0, 'a failure is not cached')
})

t.test('run(): busy failures of idempotent requests are retried within the budget', async t => {
  // AbortSignal.timeout's timer does not hold the process open (a server's sockets do): this does.
  const keepAlive = setInterval(() => {}, 1000)
  t.teardown(() => { clearInterval(keepAlive) })
  const ctx = adapterContext({} as Docker, { ...DEFAULT_ENGINE_LIMITS, read: 2, queueTimeoutMs: 2000, callTimeoutMs: 500 })
  let n = 0
  // The engine answers (alive), then resets this request twice under load, then answers.
  await ctx.run('read', 'warm', async () => 'ok')
  const v = await ctx.run('read', 'container inspect', async () => { if (++n < 3) throw coded('ECONNRESET'); return 'ok' }, { retry: true })
  t.equal(v, 'ok')
  t.equal(n, 3, 'two retries')
  let m = 0
  const once = await ctx.run('exec', 'exec start', async () => { m++; throw coded('ECONNRESET') }).then(() => null, (err: unknown) => err)
  t.equal(m, 1, 'not idempotent: never retried')
  t.ok(once instanceof DockerError && once.busy)
  let k = 0
  const answered = await ctx.run('read', 'container inspect', async () => { k++; throw status(404, 'No such container') }, { retry: true }).then(() => null, (err: unknown) => err)
  t.equal((answered as DockerError).statusCode, 404)
  t.equal(k, 1, 'an answer is not retried')
  const t0 = Date.now()
  const out = await ctx.run('read', 'slow', async s => await new Promise((_resolve, reject) => { s.addEventListener('abort', () => { reject(Object.assign(new Error('The operation was aborted', { cause: s.reason }), { name: 'AbortError', code: 'ABORT_ERR' })) }) }),
    { retry: true, deadline: Date.now() + 300 }).then(() => null, (err: unknown) => err)
  t.ok(out instanceof DockerError && out.busy, 'timed out while alive: busy')
  t.ok(Date.now() - t0 < 1500, 'the caller\'s deadline bounds the request and its retries')
  const ac = new AbortController()
  const pending = ctx.run('read', 'slow', async s => await new Promise((_resolve, reject) => { s.addEventListener('abort', () => { reject(Object.assign(new Error('The operation was aborted', { cause: s.reason }), { name: 'AbortError', code: 'ABORT_ERR' })) }) }),
    { retry: true, signal: ac.signal }).then(() => null, (err: unknown) => err)
  await sleep(20)
  ac.abort()
  const aborted = await pending
  t.ok(aborted instanceof DockerError, 'cancelled: ends at once')
})
