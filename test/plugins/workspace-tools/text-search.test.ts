import t from 'tap'
import { createSearcher, NATIVE_MAX_NEEDLE, occurrences, twoWaySearcher } from '../../../plugins/workspace-tools/text-search.js'

/** A small deterministic PRNG (mulberry32), so a failure reproduces. */
function prng (seed: number): () => number {
  let a = seed
  return () => {
    a = (a + 0x6d2b79f5) | 0
    let x = Math.imul(a ^ (a >>> 15), 1 | a)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

const cpuMs = (fn: () => unknown): number => {
  const before = process.cpuUsage()
  fn()
  const used = process.cpuUsage(before)
  return (used.user + used.system) / 1000
}

t.test('Two-Way finds exactly what indexOf finds, for every start and end bound', async t => {
  const random = prng(8)
  // Small alphabets make periodic needles and many near-matches; U+0161 shares its low byte with `a` (shift-table collisions).
  const alphabets = ['a', 'ab', 'abc', 'a\u0100b\u0161']
  let checks = 0
  let wrong = 0
  for (let round = 0; round < 20000; round++) {
    const alphabet = alphabets[round % alphabets.length] as string
    const word = (n: number): string => Array.from({ length: n }, () => alphabet[Math.floor(random() * alphabet.length)]).join('')
    const hay = word(Math.floor(random() * 50))
    const needle = word(1 + Math.floor(random() * 9))
    const searcher = twoWaySearcher(needle)
    for (let from = 0; from <= hay.length; from++) {
      const until = from + Math.floor(random() * 8)
      const expected = hay.indexOf(needle, from)
      const bounded = expected !== -1 && expected <= until ? expected : -1
      if (searcher.find(hay, from) !== expected || searcher.find(hay, from, until) !== bounded) wrong++
      checks++
    }
  }
  t.equal(wrong, 0, `${checks} searches agree with indexOf`)
})

t.test('long needles (Two-Way) and short ones (native) count the same non-overlapping occurrences', async t => {
  const long = 'x'.repeat(NATIVE_MAX_NEEDLE + 50)
  const text = `${long}y${long}${long}y`
  t.same(await occurrences(text, long), [0, long.length + 1, 2 * long.length + 1])
  t.same(await occurrences('aaaa', 'aa'), [0, 2])
  t.same(await occurrences('a'.repeat(5000), 'a'.repeat(300)).then(f => f.length), 16)
  t.same(await occurrences('abc', 'abcd'), [], 'a needle longer than the text')
  t.equal((await occurrences('a'.repeat(100000), 'a', 1000)).length, 1000, 'the limit holds')
  t.equal(createSearcher('q'.repeat(NATIVE_MAX_NEEDLE + 1)).find('zz' + 'q'.repeat(NATIVE_MAX_NEEDLE + 1), 0), 2)
})

// V8's indexOf is O(n·m) for needles over 250 characters whose mismatch lies before their last 250.
t.test('adversarial needles cost linear time', async t => {
  const text = 'a'.repeat(4 * 1024 * 1024)
  const needles = {
    'issue attack: 1,999 a + b': 'a'.repeat(1999) + 'b',
    'b + 1,999 a': 'b' + 'a'.repeat(1999),
    'a×5,000 + b + a×5,000': 'a'.repeat(5000) + 'b' + 'a'.repeat(5000)
  }
  for (const [name, needle] of Object.entries(needles)) {
    let found: number[] = []
    const ms = cpuMs(() => { found = [createSearcher(needle).find(text, 0)] })
    t.same(found, [-1], `${name}: not found`)
    // Linear: about 10 ms of CPU unloaded. Quadratic (indexOf): tens of seconds for the last needle.
    t.ok(ms < 2000, `${name}: ${ms.toFixed(0)} ms of CPU`)
  }
})
