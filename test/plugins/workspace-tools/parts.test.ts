// The workspace tools' parts without an app (text, listings, paths, outputs), one group per part, all in one test process (docs/testing.md#the-unit-tiers-time).
import t, { type Test } from 'tap'
import { binaryFileError, hasBinaryExtension, hasImageMagic, isImagePath, knownBinaryHint, looksBinary } from '../../../plugins/workspace-tools/file-kinds.js'
import { shellQuote, cpLength, firstCodePoints, lastCodePoints } from '../../../plugins/workspace-tools/text.js'
import { compareEntries, firstEntries, formatListing, listingArgv, parseListing, type ListingEntry } from '../../../plugins/workspace-tools/listing.js'
import { createOutputCapper, truncationMarker } from '../../../plugins/workspace-tools/output-capper.js'
import { chmod, link, mkdir, rename, rm, symlink, utimes, writeFile } from 'node:fs/promises'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { walkTree } from '../../../core/tree-walk.js'
import { changedOutputs, createOutputsTracker, snapshotOutputs as snapshotWith, type OutputsAccess, type TrackerLimits } from '../../../plugins/workspace-tools/outputs-snapshot.js'
import { createChatStorage } from '../../../plugins/chat-storage/service.js'
import { chatPaths } from '../../../core/chat-paths.js'
import { outputsRelative, resolveSandboxPath } from '../../../plugins/workspace-tools/paths.js'
import { countCodePoints, countNewlines, isWhitespace, offsetAfterNewlines, originalOffset, SLICE_CHARS, stripWhitespace } from '../../../plugins/workspace-tools/text-scan.js'
import { createSearcher, NATIVE_MAX_NEEDLE, occurrences, twoWaySearcher } from '../../../plugins/workspace-tools/text-search.js'
import { parseImageReport } from '../../../plugins/workspace-tools/image-script.js'
import { errorReason } from '../../../plugins/workspace-tools/sandbox-files.js'
import { prepareViewArgs } from '../../../plugins/workspace-tools/view-tool.js'
import { checkRange, numberLine, renderNumbered, splitLines, viewText } from '../../../plugins/workspace-tools/view-text.js'
import { tempDir } from '../../fixtures/temp-dir.js'

t.test('file-kinds', async t => {
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
})

t.test('listing', async t => {
  const rec = (type: string, size: number, rel: string, target = ''): string => `${type}\0${size}\0${target}\0${rel}\0`

  t.test('the listing argv passes the path as one argument, depth ≤ 2, pruning dot-dirs and bulky dirs', async t => {
    const argv = listingArgv('/home/assistant/my dir; rm -rf /')
    t.equal(argv[0], 'find')
    t.equal(argv[2], '/home/assistant/my dir; rm -rf /', 'the path is a single argv element')
    t.equal(argv.filter(a => a.includes('rm -rf')).length, 1)
    t.same(argv.slice(3, 7), ['-mindepth', '1', '-maxdepth', '2'])
    for (const name of ['.*', 'node_modules', '__pycache__']) t.ok(argv.includes(name), name)
    t.ok(argv.includes('-prune'))
  })

  t.test('parses NUL-separated records and drops a cut-off last record', async t => {
    const out = rec('d', 4096, 'src') + rec('f', 12, 'src/a\nb.ts') + rec('l', 7, 'link', '/etc') + 'f\0' + '99\0'
    const entries = parseListing(out)
    t.same(entries.map(e => e.rel), ['src', 'src/a\nb.ts', 'link'])
    t.equal(entries[2]?.target, '/etc')
    t.same(parseListing(''), [])
  })

  t.test('entries are sorted so that children follow their directory', async t => {
    const e = (rel: string): ListingEntry => ({ type: 'f', size: 0, target: '', rel })
    const sorted = [e('src-old'), e('src/b'), e('src'), e('a'), e('src/a')].sort(compareEntries).map(x => x.rel)
    t.same(sorted, ['a', 'src', 'src/a', 'src/b', 'src-old'])
  })

  t.test('format: header with the path, type marker, human size, relative path; directories end in /', async t => {
    const out = rec('d', 4096, 'src') + rec('f', 2048, 'src/main.ts') + rec('f', 5, 'README.md') +
    rec('d', 4096, 'node_modules') + rec('d', 4096, '.git') + rec('f', 10, '.env') + rec('l', 3, 'cfg', '/etc/cfg')
    const text = formatListing('/home/assistant/proj', parseListing(out), false)
    const lines = text.split('\n')
    t.match(lines[0], /^Directory \/home\/assistant\/proj\/ /)
    t.same(lines.slice(1), [
      'f     10  .env',
      'd      -  .git/  (not expanded)',
      'f      5  README.md',
      'l      3  cfg -> /etc/cfg',
      'd      -  node_modules/  (not expanded)',
      'd      -  src/',
      'f   2.0K  src/main.ts'
    ])
  })

  t.test('an empty directory says so', async t => {
    t.match(formatListing('/tmp/empty', [], false), /\n\(empty directory\)$/)
    t.match(formatListing('/', [], false), /^Directory \/ /)
  })

  t.test('at most 500 entry lines, then [... N more entries]', async t => {
    const entries = Array.from({ length: 1234 }, (_, i): ListingEntry => ({ type: 'f', size: i, target: '', rel: `f${String(i).padStart(4, '0')}` }))
    const lines = formatListing('/d', entries, false).split('\n')
    t.equal(lines.length, 1 + 500 + 1)
    t.equal(lines[lines.length - 1], '[... 734 more entries]')
    t.match(lines[1], /f0000$/)
    const cut = formatListing('/d', entries, true).split('\n')
    t.equal(cut[cut.length - 1], '[... at least 734 more entries]')
  })

  // up to 8 MiB of records from the sandbox are ordered without sorting them all.
  t.test('the first 500 of many entries are the same as a full sort would give', async t => {
    let seed = 8
    const random = (): number => { seed = (Math.imul(seed, 1103515245) + 12345) >>> 0; return seed / 4294967296 }
    const names = ['a', 'b', 'a-b', 'a b', 'ab', 'é', '😀', 'Z', 'node_modules']
    const rels = new Set<string>()
    while (rels.size < 20000) rels.add(Array.from({ length: 1 + Math.floor(random() * 2) }, () => `${names[Math.floor(random() * names.length)]}${Math.floor(random() * 3000)}`).join('/'))
    const entries = [...rels].map((rel): ListingEntry => ({ type: 'f', size: 1, target: '', rel }))
    const expected = [...entries].sort(compareEntries).slice(0, 500).map(e => e.rel)
    t.same(firstEntries(entries, 500).map(e => e.rel), expected)
    const lines = formatListing('/d', entries, false).split('\n')
    t.equal(lines.length, 502)
    t.equal(lines[501], '[... 19500 more entries]')
    t.ok(lines[1]?.endsWith(` ${expected[0]}`))
  })

  t.test('a symlink target is shown cut to 300 characters', async t => {
    const text = formatListing('/d', parseListing(rec('l', 4000, 'link', 'x'.repeat(4000))), false)
    t.ok(text.endsWith(` link -> ${'x'.repeat(299)}…`))
  })
})

t.test('output-capper', async t => {
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
})

t.test('outputs-snapshot', async t => {
// The plugin walks through chatStorage.walk (descriptor-based core walk); here the same walk over a temp dir.
  const snapshotOutputs = async (dir: string, maxEntries?: number) => await snapshotWith(opts => walkTree(dir, opts), maxEntries)

  t.test('new, resized and re-timed files are reported; untouched ones are not', async t => {
    const dir = await tempDir(t, 'wt-snap')
    await writeFile(join(dir, 'same.txt'), 'a')
    await writeFile(join(dir, 'grow.txt'), 'a')
    await writeFile(join(dir, 'touch.txt'), 'a')
    const before = await snapshotOutputs(dir)
    if (before === undefined) throw new Error('no snapshot')
    await writeFile(join(dir, 'grow.txt'), 'abc')
    await utimes(join(dir, 'touch.txt'), new Date(), new Date(Date.now() + 5000))
    await mkdir(join(dir, 'd', 'e'), { recursive: true })
    await writeFile(join(dir, 'd', 'e', 'deep.bin'), 'x')
    const after = await snapshotOutputs(dir)
    if (after === undefined) throw new Error('no snapshot')
    t.same(changedOutputs(before, after), ['d/e/deep.bin', 'grow.txt', 'touch.txt'])
  })

  t.test('symlinks are neither followed nor listed', async t => {
    const dir = await tempDir(t, 'wt-snap')
    await symlink('/etc', join(dir, 'etc'))
    await symlink('/etc/hostname', join(dir, 'host'))
    const snap = await snapshotOutputs(dir)
    t.same([...(snap ?? new Map()).keys()], [])
  })

  t.test('more than the entry cap, or a missing directory, gives no snapshot', async t => {
    const dir = await tempDir(t, 'wt-snap')
    for (let i = 0; i < 12; i++) await writeFile(join(dir, `f${i}`), '')
    t.equal(await snapshotOutputs(dir, 11), undefined)
    t.equal((await snapshotOutputs(dir, 12))?.size, 12)
    t.equal(await snapshotOutputs(join(dir, 'missing')), undefined)
  })

  /** A chat in a real chat storage (its change clock included), one tracker, and today's rule beside it. */
  async function chatOutputs (t: Test, limits?: TrackerLimits) {
    const dataDir = await tempDir(t, 'wt-clock')
    const storage = createChatStorage({ dataDir })
    const tracker = createOutputsTracker(limits)
    const access = (chat: string): OutputsAccess => ({ walk: opts => storage.walk(chat, 'outputs', opts), clock: async () => await storage.changeClock(chat, 'outputs') })
    const dir = async (chat: string): Promise<string> => { await storage.prepare(chat); return chatPaths(dataDir, chat).outputs }
    /** One command: its files as the tracker tells them, checked against a walk before and after it (the rule it replaces). */
    async function call (chat: string, command: () => Promise<void>): Promise<{ files: string[], clock: boolean }> {
      const baseline = await tracker.before(chat, access(chat))
      const before = await snapshotOutputs(chatPaths(dataDir, chat).outputs)
      await command()
      const files = await tracker.after(chat, baseline, access(chat))
      const after = await snapshotOutputs(chatPaths(dataDir, chat).outputs)
      t.same(files, before === undefined || after === undefined ? [] : changedOutputs(before, after), 'the same files as walks before and after the command')
      return { files, clock: baseline !== undefined && 'since' in baseline }
    }
    return { storage, tracker, access, dir, call, dataDir }
  }
  const pause = async (ms = 30): Promise<void> => { await new Promise(resolve => setTimeout(resolve, ms)) }

  t.test('with the change clock: the same files as a walk before each command, edges included', async t => {
    const { dir, call, storage, dataDir } = await chatOutputs(t)
    const out = await dir('c')
    if (await storage.changeClock('c', 'outputs') === undefined) {
      t.comment('skipped: the temp directory is not on a local file system')
      return
    }
    const p = (rel: string): string => join(out, rel)
    t.same(await call('c', async () => { await writeFile(p('a.txt'), 'a') }), { files: ['a.txt'], clock: false }, 'the first call walks')
    t.same(await call('c', async () => {}), { files: [], clock: true }, 'later ones read the clock; the previous command\'s file is not listed again')
    t.same(await call('c', async () => { writeFileSync(p('b.txt'), 'b') }), { files: ['b.txt'], clock: true }, 'a file written in the first moment of the command')
    t.same(await call('c', async () => { await utimes(p('a.txt'), new Date('2001-01-01'), new Date('2001-01-01')) }), { files: ['a.txt'], clock: true }, 'touched with an old mtime')
    t.same(await call('c', async () => { await rm(p('b.txt')); await symlink(p('a.txt'), p('b.txt')) }), { files: [], clock: true }, 'a file replaced by a symlink')
    t.same(await call('c', async () => { await mkdir(p('d')); await writeFile(p('d/x'), 'x') }), { files: ['d/x'], clock: true })
    await pause()
    t.same(await call('c', async () => { await rename(p('d'), p('e')) }), { files: ['e/x'], clock: true }, 'a renamed directory\'s files (their own ctime is older)')
    t.same(await call('c', async () => { await chmod(p('a.txt'), 0o600); await link(p('a.txt'), p('f.txt')) }), { files: ['f.txt'], clock: true }, 'a mode change is no change; a new hard link is a new file')
    await writeFile(p('between.txt'), 'z')
    await writeFile(join(dataDir, 'elsewhere.txt'), 'moved in')
    await pause()
    t.same(await call('c', async () => {}), { files: [], clock: true }, 'a file written between calls is not the command\'s')
    t.same(await call('c', async () => { await rename(join(dataDir, 'elsewhere.txt'), p('moved.txt')) }), { files: ['moved.txt'], clock: true }, 'a file older than the call moved in')
    t.same(await call('c', async () => { await writeFile(p('a.txt'), 'A') }), { files: ['a.txt', 'f.txt'], clock: true }, 'rewritten with the same size (f.txt is its hard link)')
  })

  t.test('without a clock every call walks; concurrent calls of a chat each list what changed during theirs', async t => {
    const { dir, storage, tracker, access, call } = await chatOutputs(t)
    const out = await dir('c')
    const none: OutputsAccess = { ...access('c'), clock: async () => undefined }
    await tracker.before('c', none)
    const walked = await tracker.before('c', none)
    t.ok(walked !== undefined && 'walked' in walked, 'no clock: a walk')
    await writeFile(join(out, 'w.txt'), 'w')
    t.same(await tracker.after('c', walked, none), ['w.txt'])
    if (await storage.changeClock('c', 'outputs') === undefined) return
    const a = await tracker.before('c', access('c'))
    const b = await tracker.before('c', access('c'))
    t.ok(a !== undefined && 'since' in a && b !== undefined && 'since' in b)
    await writeFile(join(out, 'by-a.txt'), 'a')
    t.same(await tracker.after('c', a, access('c')), ['by-a.txt'])
    await writeFile(join(out, 'by-b.txt'), 'b')
    t.same(await tracker.after('c', b, access('c')), ['by-a.txt', 'by-b.txt'], 'as a walk before b\'s command would have said')
    t.same((await call('c', async () => {})).files, [])
  })

  t.test('a clock stepped back during the command: every file that differs from the last walk is listed', async t => {
    const { dir, storage, access } = await chatOutputs(t)
    const out = await dir('c')
    if (await storage.changeClock('c', 'outputs') === undefined) return
    let step = 0
    const tracker = createOutputsTracker(undefined, undefined, { wall: () => Date.now() + step, mono: () => performance.now() })
    await tracker.after('c', await tracker.before('c', access('c')), access('c'))
    await writeFile(join(out, 'between.txt'), 'z')
    await pause()
    const steady = await tracker.before('c', access('c'))
    t.same(await tracker.after('c', steady, access('c')), [], 'a steady clock: the file written between calls is not the command\'s')
    await writeFile(join(out, 'between-2.txt'), 'z')
    await pause()
    const stepped = await tracker.before('c', access('c'))
    step = -5000
    t.same(await tracker.after('c', stepped, access('c')), ['between-2.txt'], 'stepped back 5 s: it is listed rather than risk hiding the command\'s own')
    t.same(await tracker.after('c', await tracker.before('c', access('c')), access('c')), [], 'steady again (5 s behind): nothing new')
  })

  t.test('what is kept is bounded: a chat with too many files, or the least recently used, walks again', async t => {
    const { dir, call, storage } = await chatOutputs(t, { chats: 2, files: 3, chars: 64 })
    const a = await dir('a')
    if (await storage.changeClock('a', 'outputs') === undefined) return
    await dir('b')
    await dir('c')
    t.same(await call('a', async () => { for (const f of ['1', '2', '3', '4']) await writeFile(join(a, f), f) }), { files: ['1', '2', '3', '4'], clock: false })
    t.same(await call('a', async () => {}), { files: [], clock: false }, 'four files: not kept')
    await rm(join(a, '4'))
    t.same(await call('a', async () => {}), { files: [], clock: false })
    t.same(await call('a', async () => {}), { files: [], clock: true }, 'three: kept')
    t.same(await call('b', async () => {}), { files: [], clock: false })
    t.same(await call('c', async () => {}), { files: [], clock: false })
    t.same(await call('a', async () => {}), { files: [], clock: false }, 'the least recently used of three chats was dropped')
    t.same(await call('c', async () => {}), { files: [], clock: true })
    await writeFile(join(a, 'x'.repeat(70)), 'long')
    await pause()
    t.same(await call('a', async () => {}), { files: [], clock: true }, 'kept from before the long name came')
    t.same(await call('a', async () => {}), { files: [], clock: false }, 'paths longer than the bound: not kept')
  })
})

t.test('paths', async t => {
  t.test('relative paths resolve against /home/assistant; absolute paths are normalised', async t => {
    t.same(resolveSandboxPath('notes.txt'), { path: '/home/assistant/notes.txt' })
    t.same(resolveSandboxPath('./a/../b.txt'), { path: '/home/assistant/b.txt' })
    t.same(resolveSandboxPath('~/x'), { path: '/home/assistant/x' })
    t.same(resolveSandboxPath('~'), { path: '/home/assistant' })
    t.same(resolveSandboxPath('/mnt/user-data/outputs/r.md'), { path: '/mnt/user-data/outputs/r.md' })
    t.same(resolveSandboxPath('/tmp//a/'), { path: '/tmp/a' })
    t.same(resolveSandboxPath('  spaced.txt '), { path: '/home/assistant/spaced.txt' })
  })

  t.test('empty, NUL-containing and overlong paths are rejected with invalid arguments', async t => {
    t.match((resolveSandboxPath('') as { error: string }).error, /^Error: invalid arguments: path must not be empty/)
    t.match((resolveSandboxPath('a\u0000b') as { error: string }).error, /NUL/)
    t.match((resolveSandboxPath('/' + 'a'.repeat(5000)) as { error: string }).error, /longer than 4096 bytes/)
  })

  t.test('outputs-relative paths for public URLs', async t => {
    t.equal(outputsRelative('/mnt/user-data/outputs/report.pdf'), 'report.pdf')
    t.equal(outputsRelative('/mnt/user-data/outputs/a b/c.png'), 'a b/c.png')
    t.equal(outputsRelative('/mnt/user-data/outputs'), undefined)
    t.equal(outputsRelative('/mnt/user-data/outputsX/a'), undefined)
    t.equal(outputsRelative('/home/assistant/a'), undefined)
  })
})

t.test('text-scan', async t => {
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
})

t.test('text-search', async t => {
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
})

/*
 * Untrusted text handled in the server (hostile inputs from the sandbox): what in-sandbox helpers print (a planted PIL
 * module, a flood of error lines) costs one look at the last line, never a split or a parse of megabytes;
 * a view_range string is parsed only when it could be a pair of numbers.
 */
t.test('untrusted-output', async t => {
  t.test('the image report is the last stderr line, parsed only when it is report-sized', async t => {
    t.same(parseImageReport('warning\n{"width":10,"height":5,"outWidth":10,"outHeight":5}\n\n'), { width: 10, height: 5, outWidth: 10, outHeight: 5 })
    t.same(parseImageReport('\n{"error":"decode","detail":"bad"}\n'), { error: 'decode', detail: 'bad' })
    t.equal(parseImageReport(''), undefined)
    t.equal(parseImageReport('\n\n  \n'), undefined)
    // 16 MiB of nesting: JSON.parse would spend seconds on it; the report is refused unread.
    const bomb = '['.repeat(8 << 20) + ']'.repeat(8 << 20)
    const started = process.cpuUsage()
    t.equal(parseImageReport(`${'\n'.repeat(1 << 20)}${bomb}\n`), undefined)
    const used = process.cpuUsage(started)
    t.ok((used.user + used.system) / 1000 < 2000, 'answered without parsing the bomb')
  })

  t.test('errorReason reads the reason of the last non-blank line only', async t => {
    t.equal(errorReason("mkdir: cannot create directory '/x': Permission denied\n"), 'Permission denied')
    t.equal(errorReason('find: a: Permission denied\nfind: b: No such file or directory\n\n  \n'), 'No such file or directory')
    t.equal(errorReason(''), 'unknown error')
    t.equal(errorReason(`${'noise\n'.repeat(1 << 20)}cat: x: Is a directory\n`), 'Is a directory')
    t.equal(errorReason(`e: ${'r'.repeat(1000)}`).length, 300)
  })

  t.test('a view_range string is parsed only when it is short enough to be a pair of numbers', async t => {
    t.same(prepareViewArgs({ view_range: ' [2, 3] ' }).view_range, [2, 3])
    t.same(prepareViewArgs({ view_range: ['4', ' -1 '] }).view_range, [4, -1])
    t.equal(prepareViewArgs({ view_range: 'null' }).view_range, null)
    const nested = '['.repeat(4 << 20) + ']'.repeat(4 << 20)
    const started = process.cpuUsage()
    t.equal(prepareViewArgs({ view_range: nested }).view_range, nested, 'left for validation to refuse')
    const used = process.cpuUsage(started)
    t.ok((used.user + used.system) / 1000 < 1000, 'not parsed')
  })
})

t.test('view-text', async t => {
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
})
