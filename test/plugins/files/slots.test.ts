// the semaphores behind the listing-walk and archive limits.
import t from 'tap'
import { createKeyedSlots, createSlots } from '../../../plugins/files/slots.js'

t.test('grants up to max at once, hands a released slot to the oldest waiter', async t => {
  const slots = createSlots(2, 10)
  const a = await slots.acquire(0)
  const b = await slots.acquire(0)
  t.ok(a !== undefined && b !== undefined)
  t.equal(slots.active, 2)
  const order: string[] = []
  const c = slots.acquire(5000).then(r => { order.push('c'); return r })
  const d = slots.acquire(5000).then(r => { order.push('d'); return r })
  t.equal(slots.waiting, 2)
  a?.()
  a?.() // a second release of the same slot changes nothing
  const gotC = await c
  t.ok(gotC, 'the first waiter got the slot')
  t.same(order, ['c'])
  t.equal(slots.active, 2)
  t.equal(slots.waiting, 1)
  b?.()
  t.ok(await d)
  t.same(order, ['c', 'd'])
})

t.test('a waiter gives up after waitMs; waitMs 0 and a full queue answer at once', async t => {
  const slots = createSlots(1, 1)
  const held = await slots.acquire(0)
  t.equal(await slots.acquire(0), undefined, 'no wait requested')
  const started = Date.now()
  const queued = slots.acquire(150)
  t.equal(await slots.acquire(10_000), undefined, 'the queue (1) is full: refused without waiting')
  t.ok(Date.now() - started < 100)
  t.equal(await queued, undefined, 'timed out')
  t.ok(Date.now() - started >= 140)
  t.equal(slots.waiting, 0, 'the timed-out waiter left the queue')
  held?.()
  t.equal(slots.active, 0)
  t.ok(await slots.acquire(0), 'the slot is free again')
})

t.test('keyed slots: a limit per key, keys independent, idle keys forgotten', async t => {
  const slots = createKeyedSlots(1, 1)
  const a1 = await slots.acquire('a', 0)
  t.ok(a1)
  t.equal(await slots.acquire('a', 0), undefined, 'second slot of key a')
  const b1 = await slots.acquire('b', 0)
  t.ok(b1, 'key b is independent')
  t.equal(slots.size, 2)
  const a2 = slots.acquire('a', 5000)
  a1?.()
  const got = await a2
  t.ok(got, 'the waiter of key a got the freed slot')
  got?.()
  b1?.()
  t.equal(slots.size, 0, 'no state is kept for idle keys')
  const c1 = await slots.acquire('c', 0)
  t.equal(await slots.acquire('c', 20), undefined, 'timed out on a busy key')
  c1?.()
  t.equal(slots.size, 0, 'a timed-out waiter leaves no state behind either')
})
