/*
 * walkRegularFiles against a tree that changes between listing a directory and examining its entries
 * the afterList hook swaps directories and files for symlinks at exactly that moment,
 * deterministically. Nothing outside the base may come out: no names, no sizes, no mtimes.
 */
import { mkdir, mkdtemp, readdir, realpath, rename, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { walkRegularFiles, walkTree, type WalkEntry, type WalkOptions, type WalkSummary } from '../../core/safe-path.js'

async function tree (t: Test): Promise<{ base: string, secret: string }> {
  const root = await realpath(await mkdtemp(join(tmpdir(), 'tree-walk-')))
  t.teardown(async () => { await rm(root, { recursive: true, force: true }) })
  const base = join(root, 'outputs')
  await mkdir(join(base, 'd'), { recursive: true })
  await mkdir(join(base, 'deep', 'x'), { recursive: true })
  await writeFile(join(base, 'a.txt'), 'A')
  await writeFile(join(base, 'd', 'inner.txt'), 'I')
  await writeFile(join(base, 'deep', 'x', 'y.txt'), 'Y')
  // "Another chat": a marker file at its top and one below a directory named like the victim's.
  const secret = join(root, 'other-chat')
  await mkdir(join(secret, 'x'), { recursive: true })
  await writeFile(join(secret, 'OTHER-CHAT-MARKER-1.txt'), 'S'.repeat(12345))
  await writeFile(join(secret, 'x', 'OTHER-CHAT-MARKER-2.txt'), 'S'.repeat(54321))
  return { base, secret }
}

async function walk (base: string, opts: WalkOptions = {}): Promise<{ files: WalkEntry[], summary: WalkSummary }> {
  const files: WalkEntry[] = []
  const it = walkTree(base, opts)
  for (let step = await it.next(); ; step = await it.next()) {
    if (step.done === true) return { files, summary: step.value }
    files.push(step.value)
  }
}

const leaks = (files: WalkEntry[], base: string): WalkEntry[] =>
  files.filter(f => f.relPath.includes('MARKER') || !f.absPath.startsWith(`${base}/`) || f.size === 12345 || f.size === 54321)

t.test('without changes: every regular file, sorted, files before subdirectories', async t => {
  const { base } = await tree(t)
  const { files, summary } = await walk(base)
  t.same(files.map(f => f.relPath), ['a.txt', 'd/inner.txt', 'deep/x/y.txt'])
  t.same(files.map(f => f.absPath), ['a.txt', 'd/inner.txt', 'deep/x/y.txt'].map(r => join(base, r)))
  t.match(summary, { found: true, entries: 6, exceeded: false, limited: false })
})

// a directory swapped for a symlink between readdir and the walk into it.
t.test('a directory swapped for a symlink after its parent was listed is not followed', async t => {
  const { base, secret } = await tree(t)
  const { files } = await walk(base, {
    afterList: async rel => {
      if (rel !== '') return
      await rm(join(base, 'd'), { recursive: true })
      await symlink(secret, join(base, 'd'))
    }
  })
  t.same(leaks(files, base), [], 'no name or size of the other chat')
  t.same(files.map(f => f.relPath), ['a.txt', 'deep/x/y.txt'])
})

t.test('an ancestor swapped while its subtree is walked cannot redirect the walk', async t => {
  const { base, secret } = await tree(t)
  const { files } = await walk(base, {
    afterList: async rel => {
      if (rel !== 'deep') return
      // deep/ is open and listed (it holds x/); now deep becomes a link to a tree that also has x/.
      await rename(join(base, 'deep'), join(base, 'deep.moved'))
      await symlink(secret, join(base, 'deep'))
    }
  })
  t.same(leaks(files, base), [])
  t.notOk(files.some(f => f.relPath.startsWith('deep/')), 'the moved subtree is skipped, not reported under its old name')
})

t.test('a file swapped for a symlink after the listing is skipped, its target never stat-ed', async t => {
  const { base, secret } = await tree(t)
  const { files } = await walk(base, {
    afterList: async rel => {
      if (rel !== '') return
      await rm(join(base, 'a.txt'))
      await symlink(join(secret, 'OTHER-CHAT-MARKER-1.txt'), join(base, 'a.txt'))
    }
  })
  t.same(leaks(files, base), [])
  t.same(files.map(f => f.relPath), ['d/inner.txt', 'deep/x/y.txt'])
})

t.test('planted symlinks, a base that is missing or a file', async t => {
  const { base, secret } = await tree(t)
  await symlink(secret, join(base, 'link-dir'))
  await symlink(join(secret, 'OTHER-CHAT-MARKER-1.txt'), join(base, 'link-file'))
  await symlink('/etc', join(base, 'etc'))
  const { files } = await walk(base)
  t.same(leaks(files, base), [])
  t.same(files.map(f => f.relPath), ['a.txt', 'd/inner.txt', 'deep/x/y.txt'])
  t.match((await walk(join(base, 'nope'))).summary, { found: false })
  t.match((await walk(join(base, 'a.txt'))).summary, { found: false })
  t.same((await walk(join(base, 'link-dir'))).files.map(f => f.absPath.startsWith(secret)), [true, true],
    'a base given through a symlink is walked at its real path (callers check the base itself)')
})

t.test('limits: files (limit), directory entries (maxEntries, reading stops there), depth, dot entries', async t => {
  const { base } = await tree(t)
  await mkdir(join(base, 'many'))
  for (let i = 0; i < 300; i++) await writeFile(join(base, 'many', `f${String(i).padStart(3, '0')}`), '')
  await writeFile(join(base, '.hidden'), 'h')
  t.match((await walk(base, { limit: 2 })), { files: [{ relPath: '.hidden' }, { relPath: 'a.txt' }], summary: { limited: true } })
  const capped = await walk(base, { maxEntries: 100 })
  t.match(capped.summary, { exceeded: true })
  t.ok(capped.summary.entries <= 100, `${capped.summary.entries} entries read`)
  t.match((await walk(base, { maxEntries: 308 })).summary, { exceeded: false, entries: 308 }, 'exactly the budget is fine')
  t.match((await walk(base, { maxEntries: 307 })).summary, { exceeded: true }, 'one more is not')
  t.same((await walk(base, { maxDepth: 1, skipDot: true })).files.map(f => f.relPath), ['a.txt'])
})

t.test('open descriptors stay bounded by the depth and are all closed, also after an early stop', async t => {
  const { base } = await tree(t)
  const depth = 20
  const segments = Array.from({ length: depth }, (_, i) => `l${i}`)
  await mkdir(join(base, ...segments), { recursive: true })
  await writeFile(join(base, ...segments, 'bottom.txt'), 'b')
  for (let i = 1; i <= depth; i++) await writeFile(join(base, ...segments.slice(0, i), 'side.txt'), 's')
  const fds = async (): Promise<number> => (await readdir('/proc/self/fd')).length
  const before = await fds()
  let most = 0
  const { files } = await walk(base, { afterList: async () => { most = Math.max(most, await fds()) } })
  t.ok(files.some(f => f.relPath.endsWith('bottom.txt')))
  t.ok(most - before <= depth + 4, `at most ${most - before} descriptors open for a tree ${depth + 1} levels deep`)
  t.equal(await fds(), before, 'all closed at the end')
  for await (const f of walkRegularFiles(base)) if (f.relPath.includes('l5')) break
  t.equal(await fds(), before, 'all closed after a break')
})

t.test('without /proc (not Linux) the walk checks each directory by realpath and inode instead', async t => {
  const fsp = await import('node:fs/promises')
  let refused = 0
  const { walkRegularFiles: walkNoProc } = await t.mockImport<typeof import('../../core/tree-walk.js')>('../../core/tree-walk.js', {
    'node:fs/promises': {
      ...fsp,
      readlink: async (path: string) => {
        if (path.startsWith('/proc/self/fd/')) { refused++; throw Object.assign(new Error('no /proc'), { code: 'ENOENT' }) }
        return await fsp.readlink(path)
      }
    }
  })
  const { base, secret } = await tree(t)
  await symlink(secret, join(base, 'link-dir'))
  const plain: WalkEntry[] = []
  for await (const f of walkNoProc(base)) plain.push(f)
  t.same(plain.map(f => f.relPath), ['a.txt', 'd/inner.txt', 'deep/x/y.txt'])
  t.ok(refused >= 4, 'the fallback was taken for every directory')
  const swapped: WalkEntry[] = []
  const afterList = async (rel: string): Promise<void> => {
    if (rel !== 'deep') return
    await rename(join(base, 'deep'), join(base, 'deep.moved'))
    await symlink(secret, join(base, 'deep'))
  }
  for await (const f of walkNoProc(base, { afterList })) swapped.push(f)
  t.same(leaks(swapped, base), [], 'an ancestor swapped for a symlink is still caught')
})
