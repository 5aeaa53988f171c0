import t from 'tap'
import { capInstructions } from '../../../plugins/tier-dynamic-instructions/cap.js'

t.test('text under the cap is returned unchanged', async t => {
  t.equal(capInstructions('short\ntext\n', 1024), 'short\ntext\n')
})

t.test('text over the cap is cut at a line boundary, points at README.md and stays deterministic', async t => {
  const text = Array.from({ length: 500 }, (_, i) => `line ${i} ${'é'.repeat(20)}`).join('\n')
  const cut = capInstructions(text, 4096)
  t.ok(Buffer.byteLength(cut) <= 4096, `${Buffer.byteLength(cut)} bytes`)
  t.match(cut, /\n\[Cut here: read \/home\/assistant\/README\.md for the complete guide\.\]\n$/)
  t.notMatch(cut, /\uFFFD/, 'no broken multibyte character')
  t.ok(text.startsWith(cut.slice(0, cut.indexOf('\n[Cut here'))), 'a prefix of whole lines')
  t.equal(capInstructions(text, 4096), cut)
})
