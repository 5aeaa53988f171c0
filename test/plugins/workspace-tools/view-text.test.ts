import t from 'tap'
import { checkRange, numberLine, renderNumbered, splitLines, viewText } from '../../../plugins/workspace-tools/view-text.js'
import { cpLength } from '../../../plugins/workspace-tools/text.js'

type View = Promise<{ text: string } | { error: string }>
const ok = async (p: View): Promise<string> => {
  const r = await p
  if ('error' in r) throw new Error(`unexpected error: ${r.error}`)
  return r.text
}
const err = async (p: View): Promise<string> => {
  const r = await p
  if (!('error' in r)) throw new Error('expected an error')
  return r.error
}

t.test('lines are numbered cat -n style: number right-aligned to width 6, TAB, text', async t => {
  t.equal(numberLine(1, 'a'), '     1\ta')
  t.equal(numberLine(123456, 'b'), '123456\tb')
  t.equal(numberLine(1234567, 'c'), '1234567\tc')
  t.equal(await ok(viewText('one\ntwo\n', 8, null, 30000)), '     1\tone\n     2\ttwo')
  t.equal(await ok(viewText('one\ntwo', 7, null, 30000)), '     1\tone\n     2\ttwo', 'no final newline')
  t.equal(await ok(viewText('a\n\nb\n', 5, null, 30000)), '     1\ta\n     2\t\n     3\tb', 'empty lines keep their number')
  t.equal(await ok(viewText('\tindented\n', 10, null, 30000)), '     1\t\tindented')
})

t.test('an empty file is [Empty file], not an error', async t => {
  t.equal(await ok(viewText('', 0, null, 30000)), '[Empty file]')
  t.equal(await ok(viewText('', 0, [1, 5], 30000)), '[Empty file]')
})

t.test('splitLines: a final newline ends the last line', async t => {
  t.same(splitLines('a\nb\n'), ['a', 'b'])
  t.same(splitLines('a\nb'), ['a', 'b'])
  t.same(splitLines('\n'), [''])
  t.same(splitLines(''), [])
})

const file = Array.from({ length: 50 }, (_, i) => `line ${i + 1}`).join('\n') + '\n'

t.test('view_range shows the real line numbers', async t => {
  t.equal(await ok(viewText(file, file.length, [10, 12], 30000)), '    10\tline 10\n    11\tline 11\n    12\tline 12')
  t.equal(await ok(viewText(file, file.length, [49, -1], 30000)), '    49\tline 49\n    50\tline 50', '-1 = end of file')
  t.equal(await ok(viewText(file, file.length, [50, 50], 30000)), '    50\tline 50')
  t.equal(await ok(viewText(file, file.length, [48, 1000], 30000)), '    48\tline 48\n    49\tline 49\n    50\tline 50', 'end beyond the file is clamped')
})

t.test('view_range validation messages', async t => {
  t.match(await err(viewText(file, 1, [0, 5], 30000)), /^Error: invalid view_range \[0, 5\]: the start line must be 1 or greater/)
  t.match(await err(viewText(file, 1, [-3, -1], 30000)), /start line must be 1 or greater/)
  t.match(await err(viewText(file, 1, [5, 4], 30000)), /^Error: invalid view_range \[5, 4\]: the end line must be -1 \(end of file\) or at least the start line/)
  t.match(await err(viewText(file, 1, [5, -2], 30000)), /end line must be -1/)
  t.equal(await err(viewText(file, 1, [51, -1], 30000)), 'Error: invalid view_range [51, -1]: the start line 51 is beyond the end of the file, which has 50 lines')
  t.match(await err(viewText('one line', 8, [2, 3], 30000)), /which has 1 line$/)
  t.equal(checkRange([1, -1]), undefined)
  t.equal(checkRange([3, 3]), undefined)
  t.match(checkRange([1.5, 2]) ?? '', /integers/)
})

const big = Array.from({ length: 5000 }, (_, i) => `row ${i + 1} ` + 'x'.repeat(40)).join('\n') + '\n'

t.test('more than 30,000 numbered chars: head and tail of ≤15,000 each, cut at line boundaries, with a File truncated marker', async t => {
  const text = await ok(viewText(big, big.length, null, 30000))
  const [head, rest] = text.split('\n[... File truncated') as [string, string]
  t.ok(rest !== undefined, 'marker present')
  const tail = rest.slice(rest.indexOf(']\n') + 2)
  t.ok(cpLength(head) <= 15000)
  t.ok(cpLength(tail) <= 15000)
  t.ok(cpLength(head) > 14900, 'the head budget is used')
  t.ok(head.startsWith('     1\trow 1 x'))
  t.match(head, /\trow \d+ x{40}$/, 'head ends with a whole line')
  t.match(tail, /^ {2}\d{4}\trow \d+ x{40}\n/, 'tail starts with a whole numbered line')
  t.ok(tail.endsWith('  5000\trow 5000 ' + 'x'.repeat(40)))
  const marker = rest.slice(0, rest.indexOf(']\n') + 1)
  t.match(marker, /\(\d+ bytes, 5000 lines, \d+ characters with line numbers\)/, 'total size in the marker')
  t.match(marker, /view_range/)
  const lastHead = Number(/(\d+)\trow \d+ x+$/.exec(head)?.[1])
  t.match(marker, new RegExp(`showing lines 1–${lastHead} and `))
  t.match(marker, new RegExp(`view_range \\[${lastHead + 1}, `))
})

t.test('truncation also applies to a view_range, with real numbers in the tail', async t => {
  const text = await ok(viewText(big, big.length, [1000, 4000], 30000))
  t.match(text, /File truncated/)
  t.ok(text.startsWith('  1000\trow 1000 '))
  t.ok(text.endsWith('  4000\trow 4000 ' + 'x'.repeat(40)))
})

t.test('output of exactly the limit is not truncated', async t => {
  const lines = ['a'.repeat(100 - 7)]
  const text = await renderNumbered({ first: 1, lines }, { bytes: 93, lineCount: 1 }, 100)
  t.equal(cpLength(text), 100)
  t.notMatch(text, /truncated/)
})

t.test('a single line longer than the budget is cut rather than dropped', async t => {
  const text = await ok(viewText('q'.repeat(100000), 100000, null, 30000))
  t.ok(text.startsWith('     1\tqqq'))
  t.match(text, /File truncated/)
  t.ok(cpLength(text) < 16000)
})

t.test('separate head and tail blocks of a huge file keep the real numbers of the tail', async t => {
  const head = { first: 1, lines: Array.from({ length: 3000 }, (_, i) => `h${i + 1}`) }
  const tailBlock = { first: 999001, lines: Array.from({ length: 1000 }, (_, i) => `t${999001 + i}`) }
  const text = await renderNumbered(head, { bytes: 50_000_000, lineCount: 1_000_000 }, 30000, tailBlock)
  t.ok(text.startsWith('     1\th1\n'))
  t.ok(text.endsWith('1000000\tt1000000'))
  t.match(text, /File truncated \(50000000 bytes, 1000000 lines\)/)
})

// a file is not split into an array of lines; lines are counted and located by linear scans.
t.test('hundreds of thousands of short lines: counts, real numbers and ranges stay exact', async t => {
  const lines = 600_000
  const text = Array.from({ length: lines }, (_, i) => String(i + 1)).join('\n') + '\n'
  const whole = await ok(viewText(text, text.length, null, 30000))
  t.match(whole, /^ {5}1\t1\n/)
  t.ok(whole.endsWith('600000\t600000'))
  t.match(whole, /\(\d+ bytes, 600000 lines, \d+ characters with line numbers\)/)
  t.equal(await ok(viewText(text, text.length, [300_000, 300_002], 30000)), '300000\t300000\n300001\t300001\n300002\t300002')
  t.equal(await ok(viewText(text, text.length, [599_999, -1], 30000)), '599999\t599999\n600000\t600000')
  t.equal(await err(viewText(text, text.length, [600_001, -1], 30000)), 'Error: invalid view_range [600001, -1]: the start line 600001 is beyond the end of the file, which has 600000 lines')
  const blank = '\n'.repeat(lines)
  t.match(await ok(viewText(blank, lines, null, 30000)), /600000 lines/)
})

t.test('the character count of the marker equals the rendered length, pairs counted once', async t => {
  const rows = Array.from({ length: 4000 }, (_, i) => `${i % 7 === 0 ? '😀' : 'é'} row ${i + 1}`)
  const text = rows.join('\n')
  const full = rows.map((l, i) => numberLine(i + 1, l)).join('\n')
  const shown = await ok(viewText(text, Buffer.byteLength(text), null, 30000))
  t.match(shown, new RegExp(`, ${cpLength(full)} characters with line numbers\\)`))
})
