import t from 'tap'
import { countCodePoints, countNewlines, isWhitespace, offsetAfterNewlines, originalOffset, SLICE_CHARS, stripWhitespace } from '../../../plugins/workspace-tools/text-scan.js'

const naiveNewlines = (s: string, from = 0, to = s.length): number => s.slice(from, to).split('\n').length - 1

t.test('isWhitespace is exactly the set of UTF-16 units \\s matches', async t => {
  const differ: number[] = []
  for (let c = 0; c < 0x10000; c++) if (isWhitespace(c) !== /\s/.test(String.fromCharCode(c))) differ.push(c)
  t.same(differ, [])
})

t.test('newline counting and locating agree with split, for dense, sparse and mixed text across slices', async t => {
  const texts = {
    dense: '\n'.repeat(SLICE_CHARS + 77),
    short: 'a\n'.repeat(SLICE_CHARS),
    sparse: ('x'.repeat(999) + '\n').repeat(600),
    mixed: ('ab\n'.repeat(300) + 'y'.repeat(5000) + '\n').repeat(200),
    none: 'z'.repeat(SLICE_CHARS * 2 + 5)
  }
  for (const [name, text] of Object.entries(texts)) {
    t.equal(await countNewlines(text), naiveNewlines(text), `${name}: whole text`)
    t.equal(await countNewlines(text, 17, text.length - 3), naiveNewlines(text, 17, text.length - 3), `${name}: a range`)
    const total = naiveNewlines(text)
    for (const k of [1, 2, 300, Math.floor(total / 2), total, total + 1]) {
      if (k < 1) continue
      let expected = -1
      for (let i = 0, seen = 0; i < text.length; i++) if (text[i] === '\n' && ++seen === k) { expected = i + 1; break }
      t.equal(await offsetAfterNewlines(text, 0, k), expected, `${name}: after ${k} newlines`)
    }
  }
})

t.test('code points: a surrogate pair on a slice boundary is counted once', async t => {
  const text = 'a'.repeat(SLICE_CHARS - 1) + '😀' + 'é😀'.repeat(1000)
  t.equal(await countCodePoints(text), Array.from(text).length)
  t.equal(await countCodePoints('plain'), 5)
})

t.test('whitespace stripping maps every kept character back to its offset', async t => {
  const text = ` a\tb\r\n  c\u00a0d${' '.repeat(SLICE_CHARS)}e\u2028f  `
  const stripped = await stripWhitespace(text)
  t.equal(stripped.text, 'abcdef')
  t.same([...'abcdef'].map((_, k) => text[originalOffset(text, stripped, k)]), [...'abcdef'])
  t.equal(originalOffset(text, stripped, 6), -1)
  t.equal((await stripWhitespace('😀 😀')).text, '😀😀', 'pairs survive')
  const plain = `${'x'.repeat(SLICE_CHARS * 2)} y`
  const kept = await stripWhitespace(plain)
  t.equal(kept.text, `${'x'.repeat(SLICE_CHARS * 2)}y`, 'slices without whitespace are kept whole')
  t.equal(originalOffset(plain, kept, SLICE_CHARS * 2), plain.length - 1)
})
