import t from 'tap'
import { checkReplaceArgs, decodeEditable, editSnippet, occurrences, replaceOnce, whitespaceInsensitiveLine } from '../../../plugins/workspace-tools/replace.js'

const P = '/home/assistant/a.py'

t.test('identical strings are checked first, then empty old_str', async t => {
  t.match(checkReplaceArgs('x', 'x'), /^Error: old_str and new_str are identical/)
  t.match(checkReplaceArgs('', ''), /^Error: old_str and new_str are identical/, 'identical wins over empty')
  t.match(checkReplaceArgs('', 'y'), /^Error: old_str must not be empty/)
  t.equal(checkReplaceArgs('a', 'b'), undefined)
  t.equal(checkReplaceArgs('a', ''), undefined, 'deleting is allowed')
})

t.test('binary and non-UTF-8 content is refused; a BOM is preserved', async t => {
  t.equal(decodeEditable(Buffer.from([0x61, 0x00, 0x62])), undefined)
  t.equal(decodeEditable(Buffer.from([0x61, 0xff, 0x62])), undefined)
  t.equal(decodeEditable(Buffer.from('héllo')), 'héllo')
  t.equal(decodeEditable(Buffer.from('\uFEFFbom')), '\uFEFFbom')
})

t.test('a unique match is replaced and the snippet shows real line numbers', async t => {
  const text = Array.from({ length: 20 }, (_, i) => `line ${i + 1}`).join('\n') + '\n'
  const r = await replaceOnce(text, 'line 10\n', 'LINE TEN\nextra\n', P)
  if (!r.ok) throw new Error(r.error)
  t.equal(r.line, 10)
  t.ok(r.text.includes('line 9\nLINE TEN\nextra\nline 11\n'))
  t.equal(r.text.split('\n').length, 22)
  const lines = r.snippet.split('\n')
  t.equal(lines[0], '     6\tline 6')
  t.ok(lines.includes('    10\tLINE TEN'))
  t.ok(lines.includes('    11\textra'))
  t.ok(lines.includes('    12\tline 11'))
})

t.test('an omitted new_str deletes old_str', async t => {
  const r = await replaceOnce('keep DROP keep', ' DROP', '', P)
  t.ok(r.ok && r.text === 'keep keep')
})

t.test('0 occurrences: not found, with the line of a whitespace-insensitive match when there is one', async t => {
  const text = 'def f():\n    return  1\n\ndef g():\n\treturn 2\n'
  const r = await replaceOnce(text, 'def g():\n    return 2', 'x', P)
  t.notOk(r.ok)
  if (r.ok) return
  t.match(r.error, /^Error: old_str not found in \/home\/assistant\/a\.py\./)
  t.match(r.error, /differs? .*whitespace|except for whitespace/)
  t.match(r.error, /line 4/)
  const none = await replaceOnce(text, 'nothing like it', 'x', P)
  t.ok(!none.ok && /^Error: old_str not found in /.test(none.error) && !/line \d/.test(none.error))
})

t.test('whitespace-insensitive search handles CRLF and regex metacharacters', async t => {
  t.equal(await whitespaceInsensitiveLine('a\r\nfoo(x) + [1]*2\r\n', 'foo( x ) + [1] * 2'), 2)
  t.equal(await whitespaceInsensitiveLine('abc', '   '), undefined)
})

// the hint no longer builds a regex; it must still find the line of real whitespace differences.
t.test('the hint finds the right line for tabs vs spaces, CRLF and re-indented blocks', async t => {
  const py = ['import os', '', 'class A:', '\tdef run(self):', '\t\tif self.x:', '\t\t\treturn 1', '\t\treturn 2', ''].join('\n')
  t.equal(await whitespaceInsensitiveLine(py, '    def run(self):\n        if self.x:'), 4, 'spaces where the file has tabs')
  const crlf = 'first\r\nsecond line\r\nthird\r\n'
  t.equal(await whitespaceInsensitiveLine(crlf, 'second line\nthird'), 2, 'LF where the file has CRLF')
  const js = ['function f () {', '  if (a) {', '    g()', '  }', '}', '', 'function h () {', '  return 1', '}', ''].join('\n')
  t.equal(await whitespaceInsensitiveLine(js, 'if (a) {\ng()\n}'), 2, 'a block with its indentation removed')
  t.equal(await whitespaceInsensitiveLine(js, '      function h () {\n          return 1\n      }'), 7, 'a block indented deeper')
  t.equal(await whitespaceInsensitiveLine('x\n\n\n   \tlast  word', 'lastword'), 4, 'the line of the first matched character, after blank lines')
  t.equal(await whitespaceInsensitiveLine(js, 'if (b) {'), undefined, 'a difference outside whitespace is no hint')
  const long = Array.from({ length: 400 }, (_, i) => `  value_${i} = compute(${i})`).join('\n')
  const needle = Array.from({ length: 300 }, (_, i) => `value_${i + 50} =   compute(${i + 50})`).join('\n\t')
  t.equal(await whitespaceInsensitiveLine(long, needle), 51, 'a long needle (the linear searcher) too')
})

t.test('the not-found error names that line; a quadratic-search attack (a 2,000-character near miss in 250 KB) gets the plain hint', async t => {
  const r = await replaceOnce('def f():\n\treturn 1\n', 'def f():\n    return 1', 'x', P)
  t.ok(!r.ok && /starts at line 1;/.test(r.error))
  const attack = await replaceOnce('a'.repeat(250000), 'a'.repeat(1999) + 'b', 'x', P)
  t.ok(!attack.ok && /It must match the file character for character/.test(attack.error))
})

t.test('N ≥ 2 occurrences: the count, the lines, and advice to add context', async t => {
  const r = await replaceOnce('x = 1\ny = 2\nx = 1\n', 'x = 1', 'x = 3', P)
  t.notOk(r.ok)
  if (r.ok) return
  t.match(r.error, /^Error: Found 2 occurrences of old_str in \/home\/assistant\/a\.py/)
  t.match(r.error, /lines 1, 3/)
  t.match(r.error, /more surrounding context/)
})

t.test('occurrences are counted without overlap and without normalisation', async t => {
  t.same(await occurrences('aaaa', 'aa'), [0, 2])
  t.same(await occurrences('a\r\nb', 'a\nb'), [])
  t.same(await occurrences('Abc abc', 'abc'), [4])
})

t.test('the snippet stays short for a large replacement', async t => {
  const text = Array.from({ length: 200 }, (_, i) => `l${i + 1}`).join('\n')
  t.equal((await editSnippet(text, 10, 150)).split('\n').length, 40)
})
