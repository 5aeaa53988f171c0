// a walk is bounded in time even when the tree yields no file for a long stretch.
import t from 'tap'
import type { Test } from 'tap'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { walkWithin } from '../../../plugins/files/walk-budget.js'

function tree (t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'cubicle-walk-budget-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

t.test('a tree of thousands of empty dirs (no yields) still answers at the budget; settled comes later', async t => {
  const root = tree(t)
  for (let i = 0; i < 3000; i++) mkdirSync(join(root, `d${i}`, 'e'), { recursive: true })
  mkdirSync(join(root, 'zz'))
  writeFileSync(join(root, 'zz', 'last.txt'), 'x') // the walk reaches it last
  let visited = 0
  const started = Date.now()
  const walk = await walkWithin(root, { skipDot: true }, 20, () => { visited++; return true })
  const answeredAfter = Date.now() - started
  t.equal(walk.outOfTime, true)
  t.equal(visited, 0, 'no file was reached before the budget')
  t.ok(answeredAfter < 1000, `answered after ${answeredAfter} ms`)
  await walk.settled
  t.pass('the walker stopped afterwards')
})

t.test('visit returning false stops the walk; a complete walk is not out of time', async t => {
  const root = tree(t)
  for (let i = 0; i < 10; i++) writeFileSync(join(root, `f${i}`), '')
  let seen = 0
  const stopped = await walkWithin(root, {}, 60_000, () => ++seen < 3)
  t.equal(seen, 3)
  t.equal(stopped.outOfTime, false)
  const names: string[] = []
  const full = await walkWithin(root, {}, 60_000, e => { names.push(e.relPath); return true })
  t.equal(full.outOfTime, false)
  t.equal(names.length, 10)
})

t.test('a throw from visit ends the walk and propagates', async t => {
  const root = tree(t)
  for (let i = 0; i < 5; i++) writeFileSync(join(root, `f${i}`), '')
  let seen = 0
  await t.rejects(walkWithin(root, {}, 60_000, () => { if (++seen === 2) throw new Error('too many'); return true }), /too many/)
  t.equal(seen, 2)
})
