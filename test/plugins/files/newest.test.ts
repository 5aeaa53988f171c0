// the listing keeps only the newest N of a walk, whatever order the walk yields them in.
import t from 'tap'
import { NewestHeap, newerFirst, type Kept } from '../../../plugins/files/newest.js'

function random (seed: number): () => number {
  let s = seed
  return () => { s = (s * 1103515245 + 12345) % 2147483648; return s / 2147483648 }
}

t.test('keeps exactly the newest N, sorted newest first, ties broken by path', async t => {
  const rnd = random(42)
  for (const [count, capacity] of [[0, 5], [3, 5], [5, 5], [1000, 50], [20000, 5000]] as const) {
    // Few distinct mtimes, so ties are common and the path tie-break matters.
    const all: Kept[] = Array.from({ length: count }, (_, i) => ({ relPath: `d${Math.floor(rnd() * 50)}/f${i}`, size: i, mtimeMs: Math.floor(rnd() * 200) }))
    const heap = new NewestHeap(capacity)
    for (const e of all) heap.offer(e)
    const expected = [...all].sort(newerFirst).slice(0, capacity)
    t.same(heap.sorted(), expected, `${count} offered, capacity ${capacity}`)
    t.equal(heap.dropped > 0, count > capacity, 'dropped tells whether anything was cut')
  }
})

t.test('ascending, descending and equal mtimes', async t => {
  for (const order of ['ascending', 'descending', 'equal'] as const) {
    const heap = new NewestHeap(3)
    for (let i = 0; i < 10; i++) {
      const mtimeMs = order === 'ascending' ? i : order === 'descending' ? 10 - i : 7
      heap.offer({ relPath: `f${i}`, size: 0, mtimeMs })
    }
    const paths = heap.sorted().map(e => e.relPath)
    t.same(paths, order === 'ascending' ? ['f9', 'f8', 'f7'] : ['f0', 'f1', 'f2'], order)
  }
})
