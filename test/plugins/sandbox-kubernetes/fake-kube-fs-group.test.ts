/*
 * fake-kube's fsGroup on the Docker host (test/fixtures/fake-kube/fs-group.ts), no Docker: the tree gets
 * the group, g+rwX and setgid directories, and a symlink planted in the volume is never followed out of it.
 * Needs root (fake-kube's own condition for the host path): skipped otherwise.
 */
import { lstat, mkdir, readlink, stat, symlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import t from 'tap'
import { applyFsGroup } from '../../fixtures/fake-kube/fs-group.js'
import { tempDir } from '../../fixtures/temp-dir.js'

const root = process.getuid?.() === 0
const GID = 4321

t.test('the volume\'s tree gets the group, g+rwX, setgid directories; symlinks are not followed', { skip: root ? false : 'needs root' }, async t => {
  const base = await tempDir(t, 'cu-fsgroup')
  const volume = join(base, 'volume')
  const outside = join(base, 'outside')
  await mkdir(join(volume, 'a/b'), { recursive: true, mode: 0o700 })
  await mkdir(outside, { mode: 0o700 })
  await writeFile(join(outside, 'secret'), 'x', { mode: 0o600 })
  await writeFile(join(volume, 'a/b/file'), 'y', { mode: 0o600 })
  await writeFile(join(volume, 'a/tool'), 'z', { mode: 0o700 })
  await symlink(outside, join(volume, 'a/to-dir'))
  await symlink(join(outside, 'secret'), join(volume, 'to-file'))

  await applyFsGroup(volume, GID)

  for (const dir of ['', 'a', 'a/b']) {
    const s = await stat(join(volume, dir))
    t.equal(s.gid, GID, `${dir || '.'}: group`)
    t.equal(s.mode & 0o7777, 0o2770, `${dir || '.'}: g+rwx, setgid`)
  }
  const file = await stat(join(volume, 'a/b/file'))
  t.equal(file.gid, GID)
  t.equal(file.mode & 0o7777, 0o660, 'a file: g+rw, no x')
  t.equal((await stat(join(volume, 'a/tool'))).mode & 0o7777, 0o770, 'an executable: g+rwx')
  // The links themselves get the group; what they point at is untouched.
  t.equal((await lstat(join(volume, 'to-file'))).gid, GID)
  t.equal(await readlink(join(volume, 'to-file')), join(outside, 'secret'))
  const secret = await stat(join(outside, 'secret'))
  t.equal(secret.gid, 0, 'the file outside keeps its group')
  t.equal(secret.mode & 0o7777, 0o600, 'and its mode')
  const out = await stat(outside)
  t.equal(out.gid, 0)
  t.equal(out.mode & 0o7777, 0o700, 'the directory outside is not entered')
})

t.test('a root that is a symlink or missing is refused', { skip: root ? false : 'needs root' }, async t => {
  const base = await tempDir(t, 'cu-fsgroup')
  await mkdir(join(base, 'real'))
  await symlink(join(base, 'real'), join(base, 'link'))
  await t.rejects(applyFsGroup(join(base, 'link'), GID), { code: 'ENOTDIR' }) // O_DIRECTORY|O_NOFOLLOW on a symlink
  await t.rejects(applyFsGroup(join(base, 'missing'), GID), { code: 'ENOENT' })
  t.equal((await stat(join(base, 'real'))).gid, 0)
})
