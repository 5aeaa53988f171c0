import t from 'tap'
import { binaryFileError, hasBinaryExtension, hasImageMagic, isImagePath, knownBinaryHint, looksBinary } from '../../../plugins/workspace-tools/file-kinds.js'
import { shellQuote } from '../../../plugins/workspace-tools/text.js'

t.test('Office and PDF files point to the skill to read', async t => {
  const cases: Array<[string, string]> = [['a.docx', 'docx'], ['b.XLSX', 'xlsx'], ['c.xls', 'xlsx'], ['d.pptx', 'pptx'], ['/x/e.pdf', 'pdf']]
  for (const [path, kind] of cases) {
    const hint = knownBinaryHint(path) ?? ''
    t.match(hint, /^Error: Cannot view binary file /, path)
    t.ok(hint.includes(`/mnt/skills/public/${kind}/SKILL.md`), `${path} → ${kind}`)
  }
})

t.test('archives point to the listing command with the path shell-quoted', async t => {
  t.match(knownBinaryHint('/o/a.zip'), /Cannot view binary file .*unzip -l \/o\/a\.zip$/)
  t.match(knownBinaryHint('/o/a.tar'), /tar -tvf \/o\/a\.tar$/)
  t.match(knownBinaryHint('/o/a.tar.gz'), /tar -tvf \/o\/a\.tar\.gz$/)
  t.match(knownBinaryHint('/o/a.TGZ'), /tar -tvf \/o\/a\.TGZ$/)
  t.match(knownBinaryHint('/o/log.gz'), /gunzip -c \/o\/log\.gz \| head -n 100$/)
  t.ok(knownBinaryHint("/o/it's mine; rm -rf ~.zip")?.endsWith('unzip -l \'/o/it\'"\'"\'s mine; rm -rf ~.zip\''))
  t.equal(knownBinaryHint('/o/a.txt'), undefined)
  t.equal(knownBinaryHint('/o/zip'), undefined)
})

t.test('shellQuote quotes like shlex.quote', async t => {
  t.equal(shellQuote('/plain/path-1.txt'), '/plain/path-1.txt')
  t.equal(shellQuote('with space'), "'with space'")
  t.equal(shellQuote("a'b"), '\'a\'"\'"\'b\'')
  t.equal(shellQuote('$(x)'), "'$(x)'")
  t.equal(shellQuote(''), "''")
})

t.test('other binaries: NUL in the first 8 KiB or a known extension; the error has the size and a file hint', async t => {
  t.equal(looksBinary(Buffer.from('text\0more')), true)
  t.equal(looksBinary(Buffer.concat([Buffer.alloc(8192, 'a'), Buffer.from([0])])), false, 'a NUL after 8 KiB does not count')
  t.equal(looksBinary(Buffer.from('plain text')), false)
  t.equal(hasBinaryExtension('/x/lib.so'), true)
  t.equal(hasBinaryExtension('/x/a.sqlite'), true)
  t.equal(hasBinaryExtension('/x/a.svg'), false, 'SVG is text')
  const msg = binaryFileError('/x/my file.bin', 5000)
  t.match(msg, /^Error: Cannot view binary file \/x\/my file\.bin \(4\.9K, 5000 bytes\)/)
  t.ok(msg.includes("file '/x/my file.bin'"))
})

t.test('images by extension (case-insensitive) or magic number', async t => {
  for (const p of ['a.png', 'b.JPG', 'c.jpeg', 'd.gif', 'e.webp', 'f.bmp']) t.ok(isImagePath(p), p)
  t.notOk(isImagePath('a.svg'))
  t.ok(hasImageMagic(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0])))
  t.ok(hasImageMagic(Buffer.from([0xff, 0xd8, 0xff, 0xe0])))
  t.ok(hasImageMagic(Buffer.from('GIF89a....')))
  t.ok(hasImageMagic(Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(4), Buffer.from('WEBPVP8 ')])))
  t.ok(hasImageMagic(Buffer.concat([Buffer.from('BM'), Buffer.from([1, 2, 3, 4, 0, 0, 0, 0, 54, 0])])))
  t.notOk(hasImageMagic(Buffer.from('BMW makes cars')), 'text starting with BM is not a bitmap')
  t.notOk(hasImageMagic(Buffer.from('hello')))
})
