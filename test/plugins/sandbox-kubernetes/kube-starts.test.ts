/*
 * The Kubernetes engine's bound on pods brought up at once (plugins/sandbox-kubernetes/kube-starts.ts,
 * KUBE_MAX_STARTING): at most `slots` starts run, the rest wait in order of arrival, a failed start frees
 * its slot, and 0 means no bound.
 */
import t from 'tap'
import { StartQueue } from '../../../plugins/sandbox-kubernetes/kube-starts.js'

function gate (): { promise: Promise<void>, open: () => void } {
  let open!: () => void
  const promise = new Promise<void>(resolve => { open = resolve })
  return { promise, open }
}
const tick = async (): Promise<void> => { for (let i = 0; i < 5; i++) await Promise.resolve() }

t.test('at most `slots` run at once; the rest start in order of arrival', async t => {
  const q = new StartQueue(2)
  const gates = Array.from({ length: 5 }, gate)
  const started: number[] = []
  let running = 0
  let peak = 0
  const all = gates.map(async (g, i) => await q.run(async () => {
    started.push(i)
    peak = Math.max(peak, ++running)
    await g.promise
    running--
    return i
  }))
  await tick()
  t.same(started, [0, 1], 'two started')
  t.equal(q.waiting, 3)
  gates[1]!.open()
  await tick()
  t.same(started, [0, 1, 2], 'the first in the queue took the freed slot')
  gates[0]!.open()
  gates[2]!.open()
  await tick()
  t.same(started, [0, 1, 2, 3, 4])
  gates[3]!.open()
  gates[4]!.open()
  t.same(await Promise.all(all), [0, 1, 2, 3, 4], 'each start answers its own result')
  t.equal(peak, 2, 'never more than two at once')
  t.equal(q.active, 0)
  t.equal(q.waiting, 0)
})

t.test('a failed start frees its slot', async t => {
  const q = new StartQueue(1)
  await t.rejects(q.run(async () => { throw new Error('no pod') }), { message: 'no pod' })
  t.equal(q.active, 0)
  t.equal(await q.run(async () => await Promise.resolve('next')), 'next')
})

t.test('0 slots: no bound', async t => {
  const q = new StartQueue(0)
  const g = gate()
  let running = 0
  const all = Array.from({ length: 10 }, async () => await q.run(async () => { running++; await g.promise }))
  await tick()
  t.equal(running, 10)
  g.open()
  await Promise.all(all)
})
