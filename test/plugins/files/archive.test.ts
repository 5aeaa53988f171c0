import t from 'tap'
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { entry } from '../../../core/app.js'
import capabilities from '../../../plugins/capabilities/index.js'
import files from '../../../plugins/files/index.js'
import chatStorage from '../../../plugins/chat-storage/index.js'
import { build } from '../../helper.js'
import { bearer, filesApp, KEY } from './setup.js'
import { readZip } from './zip-reader.js'
import { mkfifoSync } from './fifo.js'

t.test('the archive is a zip of every regular output with the headers of the spec', async t => {
  const { app, put } = await filesApp(t)
  put('chat-a', 'a.txt', 'alpha '.repeat(100))
  put('chat-a', 'dir/b.png', Buffer.from([0x89, 0x50, 0x4e, 0x47, 1, 2, 3]))
  put('chat-a', 'dir/sub/c.md', '# c')
  put('chat-a', 'empty.txt', '')
  const token = app.links.token('chat-a', 'f') as string
  const res = await app.inject({ url: `/files/chat-a/~${token}/archive` })
  t.equal(res.statusCode, 200)
  t.equal(res.headers['content-type'], 'application/zip')
  t.equal(res.headers['content-disposition'], 'attachment; filename="chat-chat-a-outputs.zip"')
  t.equal(res.headers['cache-control'], 'no-store')
  const entries = readZip(res.rawPayload)
  t.same(entries.map(e => e.name).sort(), ['a.txt', 'dir/b.png', 'dir/sub/c.md', 'empty.txt'])
  const byName = Object.fromEntries(entries.map(e => [e.name, e]))
  t.equal(byName['a.txt']?.content.toString(), 'alpha '.repeat(100))
  t.equal(byName['a.txt']?.method, 8, 'text is deflated')
  t.equal(byName['dir/b.png']?.method, 0, 'already-compressed types are stored')
  t.same(byName['dir/b.png']?.content, Buffer.from([0x89, 0x50, 0x4e, 0x47, 1, 2, 3]))
  t.equal(byName['empty.txt']?.size, 0)
})

t.test('the archive skips symlinks (to files, to dirs, to /etc), dot entries and fifos', async t => {
  const { app, put, outputs, dataDir } = await filesApp(t)
  put('chat-a', 'keep.txt', 'keep')
  put('chat-a', '.env', 'SECRET=1')
  put('chat-a', 'dir/.cache/x', 'cached')
  put('chat-b', 'other.txt', 'OTHER CHAT')
  const out = outputs('chat-a')
  symlinkSync('/etc/passwd', join(out, 'passwd'))
  symlinkSync('/etc', join(out, 'etc'))
  symlinkSync(outputs('chat-b'), join(out, 'other-chat'))
  symlinkSync(join(dataDir, 'chats'), join(out, 'all-chats'))
  mkfifoSync(join(out, 'pipe'))
  const res = await app.inject({ url: '/files/chat-a/archive', headers: bearer(KEY) })
  t.equal(res.statusCode, 200)
  const entries = readZip(res.rawPayload)
  t.same(entries.map(e => e.name), ['keep.txt'])
  t.notOk(res.rawPayload.includes('root:x:0:0'), 'no /etc/passwd content')
  t.notOk(res.rawPayload.includes('OTHER CHAT'), 'no other chat content')
})

t.test('404 when there are no outputs or nothing archivable', async t => {
  const { app, put } = await filesApp(t)
  let res = await app.inject({ url: '/files/none/archive', headers: bearer(KEY) })
  t.equal(res.statusCode, 404)
  t.equal(res.json().error, 'nothing_to_archive')
  put('chat-a', '.only-hidden', 'x')
  res = await app.inject({ url: '/files/chat-a/archive', headers: bearer(KEY) })
  t.equal(res.statusCode, 404)
})

t.test('413 before streaming when over the file count or byte limit', async t => {
  const { app: first, put, dataDir } = await filesApp(t)
  await first.close()
  for (let i = 0; i < 4; i++) put('chat-a', `f${i}.txt`, '0123456789')
  const app = await build(t, { DATA_DIR: dataDir, MCP_API_KEY: KEY }, config => [
    entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: '', tokenTtlSeconds: 86400, publicBaseUrl: config.publicBaseUrl }),
    entry(chatStorage, { dataDir: config.DATA_DIR }),
    entry(files, { archiveMaxFiles: 3 })
  ])
  let res = await app.inject({ url: '/files/chat-a/archive', headers: bearer(KEY) })
  t.equal(res.statusCode, 413)
  t.equal(res.json().error, 'archive_too_large')
  t.notOk(res.headers['content-disposition'])
  const { app: bytesApp, put: put2 } = await filesApp(t, { ARCHIVE_MAX_BYTES: '25' })
  for (let i = 0; i < 3; i++) put2('chat-a', `f${i}.txt`, '0123456789')
  res = await bytesApp.inject({ url: '/files/chat-a/archive', headers: bearer(KEY) })
  t.equal(res.statusCode, 413)
  t.match(res.json().detail, /25 bytes/)
})

t.test('HEAD on the archive answers the headers without a body', async t => {
  const { app, put } = await filesApp(t)
  put('chat-a', 'a.txt', 'a')
  const res = await app.inject({ method: 'HEAD', url: '/files/chat-a/archive', headers: bearer(KEY) })
  t.equal(res.statusCode, 200)
  t.equal(res.headers['content-type'], 'application/zip')
  t.equal(res.rawPayload.length, 0)
})

t.test('unzip accepts the archive (interoperability)', { skip: existsSync('/usr/bin/unzip') ? false : 'SKIPPED: /usr/bin/unzip is not installed' }, async t => {
  const { app, put } = await filesApp(t)
  put('chat-a', 'x/y.txt', 'hello zip')
  const res = await app.inject({ url: '/files/chat-a/archive', headers: bearer(KEY) })
  const file = join(mkdtempSync(join(tmpdir(), 'zip-')), 'a.zip')
  writeFileSync(file, res.rawPayload)
  const out = execFileSync('/usr/bin/unzip', ['-t', file]).toString()
  t.match(out, /No errors detected/)
  t.equal(execFileSync('/usr/bin/unzip', ['-p', file, 'x/y.txt']).toString(), 'hello zip')
})

// an output named `a\..\..\x` made yazl throw, and the whole archive was a 500.
t.test('names yazl refuses or rewrites are renamed without collisions; the archive never fails on a name', async t => {
  const { app, put } = await filesApp(t)
  put('chat-a', 'a\\..\\..\\x', 'traversal-looking')
  put('chat-a', 'd_x.txt', 'real d_x')
  put('chat-a', 'd\\x.txt', 'backslash d\\x')
  put('chat-a', 'C:evil.txt', 'drive-looking')
  put('chat-a', 'sub/back\\slash', 'nested')
  put('chat-a', 'plain.txt', 'plain')
  const res = await app.inject({ url: '/files/chat-a/archive', headers: bearer(KEY) })
  t.equal(res.statusCode, 200)
  const byName = Object.fromEntries(readZip(res.rawPayload).map(e => [e.name, e.content.toString()]))
  t.same(byName, {
    'C_evil.txt': 'drive-looking',
    'a_.._.._x': 'traversal-looking',
    'd_x (2).txt': 'backslash d\\x',
    'd_x.txt': 'real d_x',
    'plain.txt': 'plain',
    'sub/back_slash': 'nested'
  }, 'every file is in, renamed where needed; the real d_x.txt keeps its name')
  for (const name of Object.keys(byName)) t.notOk(name.includes('\\') || name.split('/').includes('..'), `${name} is a plain relative name`)
})

t.test('the listing leaves out names whose URL could not be downloaded (backslash)', async t => {
  const { app, put } = await filesApp(t)
  put('chat-a', 'a\\..\\..\\x', 'x')
  put('chat-a', 'C:evil.txt', 'c')
  const body = (await app.inject({ url: '/api/outputs/chat-a', headers: bearer(KEY) })).json()
  t.same(body.files.map((f: { path: string }) => f.path), ['C:evil.txt'])
  const res = await app.inject({ url: body.files[0].url as string, headers: bearer(KEY) })
  t.equal(res.statusCode, 200, 'what is listed downloads')
})
