import t, { type Test } from 'tap'
import { mkdtemp, mkdir, rm, symlink, utimes, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { walkTree } from '../../../core/tree-walk.js'
import { changedOutputs, snapshotOutputs as snapshotWith } from '../../../plugins/workspace-tools/outputs-snapshot.js'

// The plugin walks through chatStorage.walk (descriptor-based core walk); here the same walk over a temp dir.
const snapshotOutputs = async (dir: string, maxEntries?: number) => await snapshotWith(opts => walkTree(dir, opts), maxEntries)

async function tempDir (t: Test): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'wt-snap-'))
  t.teardown(async () => { await rm(dir, { recursive: true, force: true }) })
  return dir
}

t.test('new, resized and re-timed files are reported; untouched ones are not', async t => {
  const dir = await tempDir(t)
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
  const dir = await tempDir(t)
  await symlink('/etc', join(dir, 'etc'))
  await symlink('/etc/hostname', join(dir, 'host'))
  const snap = await snapshotOutputs(dir)
  t.same([...(snap ?? new Map()).keys()], [])
})

t.test('more than the entry cap, or a missing directory, gives no snapshot', async t => {
  const dir = await tempDir(t)
  for (let i = 0; i < 12; i++) await writeFile(join(dir, `f${i}`), '')
  t.equal(await snapshotOutputs(dir, 11), undefined)
  t.equal((await snapshotOutputs(dir, 12))?.size, 12)
  t.equal(await snapshotOutputs(join(dir, 'missing')), undefined)
})
