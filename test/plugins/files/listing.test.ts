import t from 'tap'
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { entry } from '../../../core/app.js'
import capabilities from '../../../plugins/capabilities/index.js'
import files from '../../../plugins/files/index.js'
import chatStorage from '../../../plugins/chat-storage/index.js'
import { build } from '../../helper.js'
import { bearer, filesApp, KEY } from './setup.js'

t.test('lists outputs newest first with every field, typed and with token URLs', async t => {
  const { app, put } = await filesApp(t)
  put('chat-a', 'old.csv', 'a,b', 1_700_000_000)
  put('chat-a', 'dir/new report.md', '# hi', 1_700_000_200)
  put('chat-a', 'mid.PNG', 'png', 1_700_000_100)
  const token = app.links.token('chat-a', 'f') as string
  const res = await app.inject({ url: `/api/outputs/chat-a?t=${token}` })
  t.equal(res.statusCode, 200)
  t.equal(res.headers['cache-control'], 'no-cache, no-store, must-revalidate')
  t.equal(res.headers['access-control-allow-origin'], undefined, 'no Origin, no CORS header (never *)')
  const body = res.json()
  t.equal(body.chat_id, 'chat-a')
  t.equal(body.total, 3)
  t.type(body.timestamp, 'number')
  t.notOk('truncated' in body)
  t.same(body.files.map((f: { path: string }) => f.path), ['dir/new report.md', 'mid.PNG', 'old.csv'])
  t.same(body.files[0], {
    name: 'new report.md',
    path: 'dir/new report.md',
    size: 4,
    modified: 1_700_000_200,
    type: 'markdown',
    mime: 'text/markdown',
    url: `/files/chat-a/~${token}/dir/new%20report.md`
  })
  t.equal(body.files[1].type, 'image', 'extension match is case-insensitive')
  t.equal(body.files[2].type, 'spreadsheet')
})

t.test('listing URLs percent-encode every segment and actually download the file', async t => {
  const { app, put } = await filesApp(t)
  const names = ['a b/c#d?.txt', 'per%cent.txt', 'ümlaut/日本.txt', "quote'(x)*.txt", 'plus+and&.txt']
  for (const name of names) put('chat-a', name, `content of ${name}`)
  const body = (await app.inject({ url: '/api/outputs/chat-a', headers: bearer(KEY) })).json()
  for (const file of body.files as Array<{ path: string, url: string }>) {
    t.notMatch(file.url, /[ #?'()*&+]/, `${file.path}: no raw reserved characters`)
    const res = await app.inject({ url: file.url })
    t.equal(res.statusCode, 200, `${file.path} downloads via its listed URL`)
    t.equal(res.body, `content of ${file.path}`)
  }
})

t.test('type classes follow the table, then the MIME prefix, else other', async t => {
  const { app, put } = await filesApp(t)
  const expected: Record<string, string> = {
    'a.html': 'html',
    'a.htm': 'html',
    'a.svg': 'image',
    'a.jpeg': 'image',
    'a.ico': 'image',
    'a.mp3': 'audio',
    'a.wma': 'audio',
    'a.mov': 'video',
    'a.pdf': 'pdf',
    'a.markdown': 'markdown',
    'a.tsv': 'spreadsheet',
    'a.docx': 'docx',
    'a.xls': 'xlsx',
    'a.xlsx': 'xlsx',
    'a.pptx': 'pptx',
    'a.drawio': 'drawio',
    'a.py': 'code',
    'a.xml': 'code',
    'a.json': 'code',
    Dockerfile: 'code',
    'a.txt': 'text',
    'a.env': 'text',
    'a.log': 'text',
    'a.tif': 'image',
    'a.ogv': 'video',
    'a.zip': 'other',
    'a.bin': 'other',
    noext: 'other'
  }
  for (const name of Object.keys(expected)) put('chat-a', name, 'x')
  const body = (await app.inject({ url: '/api/outputs/chat-a', headers: bearer(KEY) })).json()
  const got = Object.fromEntries((body.files as Array<{ name: string, type: string }>).map(f => [f.name, f.type]))
  t.same(got, expected)
  const drawio = (body.files as Array<{ name: string, mime: string }>).find(f => f.name === 'a.drawio')
  t.equal(drawio?.mime, 'application/xml')
})

t.test('excludes dot segments anywhere, symlinks and non-regular files', async t => {
  const { app, put, outputs } = await filesApp(t)
  put('chat-a', 'visible.txt', 'v')
  put('chat-a', '.hidden', 'h')
  put('chat-a', '.git/config', 'g')
  put('chat-a', 'dir/.secret/deep.txt', 's')
  put('chat-a', 'dir/ok.txt', 'ok')
  symlinkSync('/etc/passwd', join(outputs('chat-a'), 'passwd-link'))
  symlinkSync('/etc', join(outputs('chat-a'), 'etc-dir'))
  symlinkSync('visible.txt', join(outputs('chat-a'), 'inner-link.txt'))
  const body = (await app.inject({ url: '/api/outputs/chat-a', headers: bearer(KEY) })).json()
  t.same((body.files as Array<{ path: string }>).map(f => f.path).sort(), ['dir/ok.txt', 'visible.txt'])
})

t.test('no outputs dir answers an empty list, not 404', async t => {
  const { app } = await filesApp(t)
  const res = await app.inject({ url: '/api/outputs/never-used', headers: bearer(KEY) })
  t.equal(res.statusCode, 200)
  t.same(res.json().files, [])
  t.equal(res.json().total, 0)
})

t.test('more entries than the cap: the newest are listed and truncated is true', async t => {
  const { app: plain, put, dataDir } = await filesApp(t)
  for (let i = 0; i < 12; i++) put('chat-a', `f${i}.txt`, 'x', 1_700_000_000 + i)
  await plain.close()
  const app = await build(t, { DATA_DIR: dataDir, MCP_API_KEY: KEY }, config => [
    entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: '', tokenTtlSeconds: 86400, publicBaseUrl: config.publicBaseUrl }),
    entry(chatStorage, { dataDir: config.DATA_DIR }),
    entry(files, { listingMaxEntries: 5 })
  ])
  const body = (await app.inject({ url: '/api/outputs/chat-a', headers: bearer(KEY) })).json()
  t.equal(body.truncated, true)
  t.equal(body.total, 5)
  t.same((body.files as Array<{ name: string }>).map(f => f.name), ['f11.txt', 'f10.txt', 'f9.txt', 'f8.txt', 'f7.txt'])
})

t.test('open mode lists reference-shaped URLs without tokens', async t => {
  const { app, put } = await filesApp(t, {}, true)
  put('chat-a', 'sub dir/x.txt', 'x')
  const body = (await app.inject({ url: '/api/outputs/chat-a' })).json()
  t.equal(body.files[0].url, '/files/chat-a/sub%20dir/x.txt')
})

t.test('an outputs dir that is itself a symlink is treated as missing', async t => {
  const { app, dataDir, outputs } = await filesApp(t)
  mkdirSync(join(dataDir, 'elsewhere'), { recursive: true })
  writeFileSync(join(dataDir, 'elsewhere', 'leak.txt'), 'LEAK')
  mkdirSync(join(outputs('chat-a'), '..'), { recursive: true })
  symlinkSync(join(dataDir, 'elsewhere'), outputs('chat-a'))
  t.same((await app.inject({ url: '/api/outputs/chat-a', headers: bearer(KEY) })).json().files, [])
  t.equal((await app.inject({ url: '/files/chat-a/leak.txt', headers: bearer(KEY) })).statusCode, 404)
  t.equal((await app.inject({ url: '/files/chat-a/archive', headers: bearer(KEY) })).statusCode, 404)
})
