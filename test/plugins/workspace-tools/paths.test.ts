import t from 'tap'
import { outputsRelative, resolveSandboxPath } from '../../../plugins/workspace-tools/paths.js'

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
