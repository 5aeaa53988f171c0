import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises'
import { execFileSync } from 'node:child_process'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { openVerified, parseRelPath, resolveInside, walkRegularFiles } from '../../core/safe-path.js'

async function tree (t: Test): Promise<{ root: string, base: string, secret: string }> {
  const root = await realpath(await mkdtemp(join(tmpdir(), 'safe-path-')))
  t.teardown(async () => { await rm(root, { recursive: true, force: true }) })
  const base = join(root, 'base')
  await mkdir(join(base, 'sub', 'deep'), { recursive: true })
  await writeFile(join(base, 'a.txt'), 'A')
  await writeFile(join(base, 'sub', 'b.json'), '{}')
  await writeFile(join(base, 'sub', 'deep', 'c.bin'), Buffer.alloc(10))
  await writeFile(join(base, '.hidden'), 'h')
  await mkdir(join(base, '.git'))
  await writeFile(join(base, '.git', 'config'), 'x')
  const secret = join(root, 'secret.txt')
  await writeFile(secret, 'TOP SECRET')
  await symlink(secret, join(base, 'link-to-secret'))
  await symlink(root, join(base, 'link-dir'))
  await symlink('/nonexistent/target', join(base, 'dangling'))
  return { root, base, secret }
}

const code = (err: unknown): unknown => (err as { code?: string }).code
const status = (err: unknown): unknown => (err as { statusCode?: number }).statusCode
/** `{ code, statusCode }` of the rejection, or 'resolved' so an unexpected success fails the assertion. */
async function failure (p: Promise<unknown>): Promise<unknown> {
  return await p.then(() => 'resolved', (err: unknown) => ({ code: code(err), statusCode: status(err) }))
}

t.test('parseRelPath accepts nested paths and keeps percent signs literal', async t => {
  t.same(parseRelPath('sub/nested.json'), ['sub', 'nested.json'])
  t.same(parseRelPath('%252e%252e/x'), ['%252e%252e', 'x'])
  t.same(parseRelPath('%2e%2e'), ['%2e%2e'])
  t.same(parseRelPath('über file.txt'), ['über file.txt'])
})

t.test('parseRelPath rejects every docs/contract.md#path-rules violation with 400 CORE_INVALID_PATH', async t => {
  const bad = ['', '/abs', 'a//b', 'a/', '.', '..', 'a/../b', './a', 'a\\b', 'a\u0000b', 'a\nb', 'a\u007fb', 'a\u001fb',
    'x'.repeat(256), `${'a'.repeat(200)}/`.repeat(6) + 'z']
  for (const raw of bad) {
    t.match(await failure(Promise.resolve().then(() => parseRelPath(raw))), { code: 'CORE_INVALID_PATH', statusCode: 400 }, JSON.stringify(raw.slice(0, 20)))
  }
  // 255 bytes is the limit per segment; multibyte characters count in bytes.
  t.same(parseRelPath('x'.repeat(255)).length, 1)
  t.match(await failure(Promise.resolve().then(() => parseRelPath('é'.repeat(128)))), { code: 'CORE_INVALID_PATH' })
})

t.test('resolveInside returns the real path of a file inside the base', async t => {
  const { base } = await tree(t)
  t.equal(await resolveInside(base, ['sub', 'b.json']), join(base, 'sub', 'b.json'))
})

t.test('resolveInside refuses a symlink that leaves the base with 403', async t => {
  const { base } = await tree(t)
  t.match(await failure(resolveInside(base, ['link-to-secret'])), { statusCode: 403, code: 'CORE_FORBIDDEN' })
  t.match(await failure(resolveInside(base, ['link-dir', 'secret.txt'])), { statusCode: 403 })
  t.match(await failure(resolveInside(base, ['dangling'])), { statusCode: 403 })
  t.match(await failure(resolveInside(base, ['dangling', 'x'])), { statusCode: 403 })
})

t.test('resolveInside appends a missing tail for upload targets, inside the base', async t => {
  const { base } = await tree(t)
  t.equal(await resolveInside(base, ['new', 'dir', 'file.txt']), join(base, 'new', 'dir', 'file.txt'))
  t.equal(await resolveInside(base, ['sub', 'new.txt']), join(base, 'sub', 'new.txt'))
  t.match(await failure(resolveInside(base, ['link-dir', 'new.txt'])), { statusCode: 403 })
})

t.test('resolveInside answers 404 for a missing base or a file used as a directory', async t => {
  const { root, base } = await tree(t)
  t.match(await failure(resolveInside(join(root, 'nope'), ['a'])), { statusCode: 404, code: 'CORE_PATH_NOT_FOUND' })
  t.match(await failure(resolveInside(base, ['a.txt', 'x'])), { statusCode: 404 })
})

t.test('openVerified opens a regular file inside the base and reads it', async t => {
  const { base } = await tree(t)
  const fh = await openVerified(base, join(base, 'a.txt'))
  t.teardown(() => fh.close())
  t.equal((await fh.readFile()).toString(), 'A')
})

t.test('openVerified refuses symlinks, directories, fifos and outside files', async t => {
  const { base, secret } = await tree(t)
  const err1 = await openVerified(base, join(base, 'link-to-secret')).catch(e => e)
  t.equal(status(err1), 403, 'final symlink')
  const err2 = await openVerified(base, join(base, 'link-dir', 'secret.txt')).catch(e => e)
  t.equal(status(err2), 403, 'symlinked parent pointing outside (the swap race)')
  const err3 = await openVerified(base, secret).catch(e => e)
  t.equal(status(err3), 403, 'path outside the base')
  const err4 = await openVerified(base, join(base, 'sub')).catch(e => e)
  t.equal(code(err4), 'CORE_PATH_IS_DIRECTORY')
  const err5 = await openVerified(base, join(base, 'missing')).catch(e => e)
  t.equal(status(err5), 404)
  execFileSync('mkfifo', [join(base, 'pipe')])
  const err6 = await openVerified(base, join(base, 'pipe')).catch(e => e)
  t.equal(status(err6), 403, 'fifo refused without hanging')
})

t.test('walkRegularFiles lists regular files only and never follows symlinks', async t => {
  const { base } = await tree(t)
  const all = []
  for await (const e of walkRegularFiles(base)) all.push(e.relPath)
  t.same(all.sort(), ['.git/config', '.hidden', 'a.txt', 'sub/b.json', 'sub/deep/c.bin'])
  const visible = []
  for await (const e of walkRegularFiles(base, { skipDot: true })) visible.push(e)
  t.same(visible.map(e => e.relPath).sort(), ['a.txt', 'sub/b.json', 'sub/deep/c.bin'])
  const bin = visible.find(e => e.relPath === 'sub/deep/c.bin')
  t.equal(bin?.size, 10)
  t.ok((bin?.mtimeMs ?? 0) > 0)
  t.equal(bin?.absPath, join(base, 'sub', 'deep', 'c.bin'))
})

t.test('walkRegularFiles stops at the limit and yields nothing for a missing base', async t => {
  const { root, base } = await tree(t)
  let n = 0
  for await (const e of walkRegularFiles(base, { limit: 2 })) { t.ok(e.relPath); n++ }
  t.equal(n, 2)
  const none = []
  for await (const e of walkRegularFiles(join(root, 'missing'))) none.push(e)
  t.same(none, [])
})
