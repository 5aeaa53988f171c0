import t from 'tap'
import { compareEntries, firstEntries, formatListing, listingArgv, parseListing, type ListingEntry } from '../../../plugins/workspace-tools/listing.js'

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
