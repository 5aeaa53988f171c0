import t from 'tap'
import { createOutputCapper, truncationMarker } from '../../../plugins/workspace-tools/output-capper.js'
import { cpLength, firstCodePoints, lastCodePoints } from '../../../plugins/workspace-tools/text.js'

const EMOJI = '😀' // one code point, two UTF-16 units

t.test('output under the cap comes back unchanged, whatever the chunking', async t => {
  const capper = createOutputCapper(30000)
  const text = 'hello\nworld\n'.repeat(1000)
  for (let i = 0; i < text.length; i += 7) capper.push(text.slice(i, i + 7))
  const out = capper.finish()
  t.equal(out.text, text)
  t.equal(out.truncated, false)
  t.equal(out.total, text.length)
})

t.test('exactly MAX chars is not truncated; MAX+1 is', async t => {
  const a = createOutputCapper(1000)
  a.push('x'.repeat(1000))
  t.equal(a.finish().truncated, false)
  const b = createOutputCapper(1000)
  b.push('x'.repeat(1001))
  const out = b.finish()
  t.equal(out.truncated, true)
  t.equal(out.total, 1001)
})

t.test('1e6 chars keep the first 15,000, the last 15,000, the total, and a marker that says so', async t => {
  const capper = createOutputCapper(30000)
  let all = ''
  for (let i = 0; i < 1000; i++) {
    const chunk = `${String(i).padStart(4, '0')}:` + 'a'.repeat(995)
    all += chunk
    capper.push(chunk)
  }
  t.equal(all.length, 1_000_000)
  const out = capper.finish()
  t.equal(out.truncated, true)
  t.equal(out.total, 1_000_000)
  t.equal(out.head, all.slice(0, 15000))
  t.equal(out.tail, all.slice(-15000))
  t.ok(out.text.startsWith(all.slice(0, 15000)))
  t.ok(out.text.endsWith(all.slice(-15000)))
  const marker = out.text.slice(15000, out.text.length - 15000)
  t.equal(marker, truncationMarker(1_000_000, 15000, 15000))
  t.match(marker, /truncated/)
  t.match(marker, /1000000/)
  t.match(marker, /15000/)
  t.match(marker, /head, tail, grep or view/)
})

t.test('one huge chunk is capped the same way as many small ones', async t => {
  const capper = createOutputCapper(30000)
  const big = 'b'.repeat(500_000) + 'END'
  capper.push('start')
  capper.push(big)
  const out = capper.finish()
  t.equal(out.total, 5 + big.length)
  t.ok(out.text.startsWith('start' + 'b'.repeat(14995)))
  t.ok(out.text.endsWith('b'.repeat(14997) + 'END'))
})

t.test('memory stays bounded: the tail buffer never exceeds twice its budget while streaming 5e6 chars', async t => {
  const capper = createOutputCapper(30000)
  const chunk = 'z'.repeat(65536)
  for (let i = 0; i < 80; i++) {
    capper.push(chunk)
    t.ok(capper.recent(15000).length <= 15000)
  }
  const out = capper.finish()
  t.equal(out.total, 80 * 65536)
  t.equal(cpLength(out.text) - cpLength(truncationMarker(out.total, 15000, 15000)), 30000)
})

t.test('counts and cuts by code points: emoji at the head boundary are never split', async t => {
  const capper = createOutputCapper(10)
  // 4 ASCII + 3 emoji = 7 code points in the head budget of 5: head = 'abcd' + one emoji.
  capper.push('abcd' + EMOJI.repeat(3))
  capper.push('x'.repeat(20))
  const out = capper.finish()
  t.equal(out.total, 27)
  t.equal(out.head, 'abcd' + EMOJI)
  t.equal(cpLength(out.head), 5)
  t.equal(out.tail, 'xxxxx')
  t.notMatch(out.text, /[\uD800-\uDBFF](?![\uDC00-\uDFFF])/, 'no lone high surrogate')
})

t.test('emoji at the tail boundary are never split', async t => {
  const capper = createOutputCapper(10)
  capper.push('y'.repeat(100))
  capper.push(EMOJI.repeat(7))
  const out = capper.finish()
  t.equal(out.tail, EMOJI.repeat(5))
  t.equal(out.total, 107)
})

t.test('a surrogate pair split across two chunks is joined, not counted twice or cut', async t => {
  const capper = createOutputCapper(4)
  const pair = EMOJI
  capper.push('a' + pair[0])
  capper.push(pair[1] + 'bcdefg')
  const out = capper.finish()
  t.equal(out.total, 8)
  t.equal(out.head, 'a' + EMOJI)
  t.equal(out.tail, 'fg')
})

t.test('a lone high surrogate at the very end is kept and counted', async t => {
  const capper = createOutputCapper(100)
  capper.push('ab\uD83D')
  const out = capper.finish()
  t.equal(out.total, 3)
  t.equal(out.text, 'ab\uD83D')
})

t.test('recent() returns the newest output for progress messages', async t => {
  const capper = createOutputCapper(100)
  capper.push('line one\n')
  capper.push('line two\n')
  t.equal(capper.recent(9), 'line two\n')
  for (let i = 0; i < 50; i++) capper.push(`row ${i}\n`)
  t.ok(capper.recent(20).endsWith('row 49\n'))
})

t.test('first/lastCodePoints never split pairs', async t => {
  const s = EMOJI + 'a' + EMOJI + EMOJI
  t.equal(firstCodePoints(s, 1), EMOJI)
  t.equal(firstCodePoints(s, 3), EMOJI + 'a' + EMOJI)
  t.equal(lastCodePoints(s, 1), EMOJI)
  t.equal(lastCodePoints(s, 3), 'a' + EMOJI + EMOJI)
  t.equal(cpLength(s), 4)
})
