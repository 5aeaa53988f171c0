// The files plugin (listing, download, archive, auth, descriptors, slots), one group per part, all in one test process (docs/testing.md#the-unit-tiers-time); listing-limits.test.ts, which builds 100,000 files, stays on its own.
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, symlinkSync, writeFileSync, rmSync, mkdirSync, renameSync, unlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { entry } from '../../../core/app.js'
import capabilities from '../../../plugins/capabilities/index.js'
import files from '../../../plugins/files/index.js'
import chatStorage from '../../../plugins/chat-storage/index.js'
import { build, OTHER_API_KEY, TEST_API_KEY } from '../../helper.js'
import { bearer, filesApp, KEY } from './setup.js'
import { readZip } from './zip-reader.js'
import { mkfifoSync } from './fifo.js'
import type { FastifyInstance } from 'fastify'
import type { Test } from 'tap'
import { createLinkService } from '../../../plugins/capabilities/service.js'
import preview from '../../../plugins/preview/index.js'
import { chatPaths } from '../../../core/chat-paths.js'
import { CAPABILITY_TOKEN } from '../../../core/tokens.js'
import Fastify from 'fastify'
import { parseOptions } from '../../../core/config.js'
import { openVerified, resolveInside } from '../../../core/safe-path.js'
import { FilesOptions } from '../../../plugins/files/schemas.js'
import { createFilesService } from '../../../plugins/files/service.js'
import { createChatStorage } from '../../../plugins/chat-storage/service.js'
import { createListingCache, type Produced } from '../../../plugins/files/listing-cache.js'
import { NewestHeap, newerFirst, type Kept } from '../../../plugins/files/newest.js'
import { createKeyedSlots, createSlots } from '../../../plugins/files/slots.js'
import { walkWithin } from '../../../plugins/files/walk-budget.js'

t.test('archive', async t => {
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
})

t.test('auth', async t => {
  async function app (t: Test, dataDir: string, key = KEY): Promise<FastifyInstance> {
    return await build(t, { DATA_DIR: dataDir, MCP_API_KEY: key }, config => [
      entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: '', tokenTtlSeconds: config.LINK_TOKEN_TTL, publicBaseUrl: config.publicBaseUrl }),
      entry(chatStorage, { dataDir: config.DATA_DIR }),
      entry(files, {}),
      entry(preview, {})
    ])
  }

  function dataDirWithOutputs (t: Test): string {
    const dataDir = mkdtempSync(join(tmpdir(), 'cubicle-auth-'))
    t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
    for (const chat of ['chat-a', 'chat-b']) {
      const out = chatPaths(dataDir, chat).outputs
      mkdirSync(out, { recursive: true })
      writeFileSync(join(out, 'a.txt'), `content of ${chat}`)
    }
    return dataDir
  }

  /** Every chat route of this plugin pair, as a function of how the credential is presented. */
  const ROUTES: Array<[string, (chat: string, token?: string) => { url: string, headers?: Record<string, string> }]> = [
    ['file (path token)', (chat, token) => ({ url: token === undefined ? `/files/${chat}/a.txt` : `/files/${chat}/~${token}/a.txt` })],
    ['file (?t=)', (chat, token) => ({ url: `/files/${chat}/a.txt${token === undefined ? '' : `?t=${token}`}` })],
    ['file (bearer)', (chat, token) => ({ url: `/files/${chat}/a.txt`, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } })],
    ['archive (path token)', (chat, token) => ({ url: token === undefined ? `/files/${chat}/archive` : `/files/${chat}/~${token}/archive` })],
    ['outputs listing', (chat, token) => ({ url: `/api/outputs/${chat}${token === undefined ? '' : `?t=${token}`}` })],
    ['preview page', (chat, token) => ({ url: `/preview/${chat}${token === undefined ? '' : `?t=${token}`}` })]
  ]

  t.test('token matrix on every chat route: missing 401, bad 403, valid 200', async t => {
    const dataDir = dataDirWithOutputs(t)
    const server = await app(t, dataDir)
    const valid = server.links.token('chat-a', 'f') as string
    const control = server.links.token('chat-a', 'c') as string
    const expired = createLinkService({ apiKey: KEY, signingKey: '', tokenTtlSeconds: 60, publicBaseUrl: 'http://x', now: () => Date.now() - 3 * 86400_000 }).token('chat-a', 'f') as string
    const otherServer = createLinkService({ apiKey: OTHER_API_KEY, signingKey: '', tokenTtlSeconds: 86400, publicBaseUrl: 'http://x' }).token('chat-a', 'f') as string
    const [v, s, exp, sig] = valid.split('.') as [string, string, string, string]
    const bad: Record<string, string> = {
      expired,
      'wrong chat': server.links.token('chat-b', 'f') as string,
      'control token of another chat': server.links.token('chat-b', 'c') as string,
      'tampered signature': `${v}.${s}.${exp}.${sig.slice(0, -2)}${sig.endsWith('AA') ? 'BB' : 'AA'}`,
      'tampered expiry': `${v}.${s}.${Number(exp) + 86400}.${sig}`,
      'scope letter swapped': `${v}.c.${exp}.${sig}`,
      'signed by another server (rotated key)': otherServer,
      'wrong API key': 'not-the-key'
    }
    let n = 0
    for (const [route, build] of ROUTES) {
    // One client address per route keeps the failed-auth throttle (30/min per address) out of the way.
      const remoteAddress = `10.0.0.${++n}`
      const req = (chat: string, token?: string) => ({ ...build(chat, token), remoteAddress })
      const missing = await server.inject(req('chat-a'))
      t.equal(missing.statusCode, 401, `${route}: missing → 401`)
      t.equal(missing.headers['www-authenticate'], 'Bearer')
      t.equal(missing.json().error, 'Unauthorized')
      for (const [name, token] of Object.entries(bad)) {
      // Path-token routes only treat a well-formed token as a token; anything else is a file name there.
        const r = await server.inject(req('chat-a', token))
        if (route.includes('path token') && !CAPABILITY_TOKEN.test(token)) {
          t.equal(r.statusCode, 401, `${route}: ${name} is no token → 401`)
        } else {
          t.equal(r.statusCode, 403, `${route}: ${name} → 403`)
          t.equal(r.json().error, 'forbidden')
        }
        t.notMatch(r.body, /content of chat/, `${route}: ${name} leaks nothing`)
      }
      t.equal((await server.inject(req('chat-a', valid))).statusCode, 200, `${route}: valid files token → 200`)
      t.equal((await server.inject(req('chat-a', control))).statusCode, 200, `${route}: control token → 200`)
      const withKey = req('chat-a')
      t.equal((await server.inject({ ...withKey, headers: { ...withKey.headers, authorization: `Bearer ${KEY}` } })).statusCode, 200, `${route}: API key → 200`)
    }
  })

  t.test('a token for chat A never opens chat B, on any route', async t => {
    const server = await app(t, dataDirWithOutputs(t))
    const tokenA = server.links.token('chat-a', 'f') as string
    for (const [route, req] of ROUTES) {
      const res = await server.inject({ ...req('chat-b', tokenA), remoteAddress: `10.1.0.${route.length}` })
      t.equal(res.statusCode, 403, route)
      t.notMatch(res.body, /content of chat-b/)
    }
  })

  t.test('validation order: bad chat id 400, then 401/403, only then 404', async t => {
    const server = await app(t, dataDirWithOutputs(t))
    const token = server.links.token('chat-a', 'f') as string
    for (const url of ['/files/Bad.Chat/a.txt', '/api/outputs/-x', '/preview/a%20b', '/files/_x/archive']) {
      const res = await server.inject({ url })
      t.equal(res.statusCode, 400, `${url} without credentials`)
      t.equal(res.json().error, 'invalid_chat_id')
    }
    t.equal((await server.inject({ url: '/files/no-such-chat/x.txt' })).statusCode, 401, 'no existence oracle without credentials')
    t.equal((await server.inject({ url: `/files/no-such-chat/x.txt?t=${token}` })).statusCode, 403, 'nor with a token of another chat')
    t.equal((await server.inject({ url: `/files/chat-a/~${token}/missing.txt` })).statusCode, 404, 'existence only after auth')
    t.equal((await server.inject({ url: '/files/chat-a/a.txt', headers: { authorization: 'Bearer nope' } })).statusCode, 403)
  })

  t.test('rotating MCP_API_KEY revokes every link', async t => {
    const dataDir = dataDirWithOutputs(t)
    const before = await app(t, dataDir, KEY)
    const token = before.links.token('chat-a', 'f') as string
    t.equal((await before.inject({ url: `/files/chat-a/~${token}/a.txt` })).statusCode, 200)
    const restarted = await app(t, dataDir, KEY)
    t.equal((await restarted.inject({ url: `/files/chat-a/~${token}/a.txt` })).statusCode, 200, 'a restart with the same key keeps links')
    const rotated = await app(t, dataDir, OTHER_API_KEY)
    t.equal((await rotated.inject({ url: `/files/chat-a/~${token}/a.txt` })).statusCode, 403)
    t.equal((await rotated.inject({ url: `/preview/chat-a?t=${token}` })).statusCode, 403)
  })

  t.test('uppercase chat ids are normalised before the token check', async t => {
    const server = await app(t, dataDirWithOutputs(t))
    const token = server.links.token('chat-a', 'f') as string
    const res = await server.inject({ url: `/files/CHAT-A/~${token}/a.txt` })
    t.equal(res.statusCode, 200)
    t.equal(res.body, 'content of chat-a')
  })
})

t.test('download', async t => {
  t.test('serves an output file with the files token in the path, typed and inline', async t => {
    const { app, put } = await filesApp(t)
    put('chat-a', 'report.txt', 'hello world')
    const token = app.links.token('chat-a', 'f') as string
    const res = await app.inject({ url: `/files/chat-a/~${token}/report.txt` })
    t.equal(res.statusCode, 200)
    t.equal(res.body, 'hello world')
    t.equal(res.headers['content-type'], 'text/plain; charset=utf-8')
    t.equal(res.headers['content-disposition'], 'inline; filename="report.txt"; filename*=UTF-8\'\'report.txt')
    t.equal(res.headers['x-content-type-options'], 'nosniff')
    t.equal(res.headers['cache-control'], 'private, no-cache')
    t.equal(res.headers['access-control-allow-origin'], undefined, 'no Origin, no CORS header (never *)')
    t.notOk(res.headers['access-control-allow-credentials'])
    t.match(res.headers.etag, /^"[0-9a-f]+-[0-9a-f]+-[0-9a-f]+"$/)
    t.ok(res.headers['last-modified'])
    t.equal(res.headers['content-length'], '11')
  })

  t.test('accepts the token as ?t= and as a bearer header, and the API key', async t => {
    const { app, put } = await filesApp(t)
    put('chat-a', 'a.txt', 'A')
    const token = app.links.token('chat-a', 'f') as string
    t.equal((await app.inject({ url: `/files/chat-a/a.txt?t=${token}` })).statusCode, 200)
    t.equal((await app.inject({ url: '/files/chat-a/a.txt', headers: bearer(token) })).statusCode, 200)
    t.equal((await app.inject({ url: '/files/chat-a/a.txt', headers: bearer(KEY) })).statusCode, 200)
    const control = app.links.token('chat-a', 'c') as string
    t.equal((await app.inject({ url: `/files/chat-a/~${control}/a.txt` })).statusCode, 200, 'a control token also grants files')
  })

  t.test('?download=1 sends an octet-stream attachment with an ASCII fallback and a UTF-8 filename', async t => {
    const { app, put } = await filesApp(t)
    put('chat-a', 'dir/Bericht "Q1" ü.csv', 'a,b\n1,2\n')
    const res = await app.inject({ url: `/files/chat-a/dir/${encodeURIComponent('Bericht "Q1" ü.csv')}?download=1`, headers: bearer(KEY) })
    t.equal(res.statusCode, 200)
    t.equal(res.headers['content-type'], 'application/octet-stream')
    t.equal(res.headers['content-disposition'], 'attachment; filename="Bericht _Q1_ _.csv"; filename*=UTF-8\'\'Bericht%20%22Q1%22%20%C3%BC.csv')
  })

  t.test('MIME by extension: images, pdf, json with charset, unknown as octet-stream', async t => {
    const { app, put } = await filesApp(t)
    const cases: Array<[string, string]> = [['p.png', 'image/png'], ['d.pdf', 'application/pdf'], ['x.json', 'application/json; charset=utf-8'],
      ['m.md', 'text/markdown; charset=utf-8'], ['v.webm', 'video/webm'], ['s.mp3', 'audio/mpeg'], ['blob.bin', 'application/octet-stream'],
      ['noext', 'application/octet-stream'], ['UPPER.PNG', 'image/png']]
    for (const [name, type] of cases) {
      put('chat-a', name, 'x')
      const res = await app.inject({ url: `/files/chat-a/${name}`, headers: bearer(KEY) })
      t.equal(res.headers['content-type'], type, name)
      t.notOk(res.headers['content-security-policy'], `${name} is not active content`)
    }
  })

  t.test('HTML, SVG and XML served inline carry the sandbox CSP with FRAME_ANCESTORS', async t => {
    const { app, put } = await filesApp(t, { FRAME_ANCESTORS: 'https://chat.example.com' })
    const csp = 'sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads; frame-ancestors https://chat.example.com'
    for (const name of ['page.html', 'page.htm', 'pic.svg', 'data.xml', 'doc.xhtml', 'diagram.drawio']) {
      put('chat-a', name, '<x/>')
      const res = await app.inject({ url: `/files/chat-a/${name}`, headers: bearer(KEY) })
      t.equal(res.headers['content-security-policy'], csp, name)
      t.equal(res.headers['x-content-type-options'], 'nosniff')
    }
    const dl = await app.inject({ url: '/files/chat-a/page.html?download=1', headers: bearer(KEY) })
    t.equal(dl.headers['content-type'], 'application/octet-stream')
    t.match(dl.headers['content-disposition'], /^attachment;/)
  })

  t.test('byte ranges: 206 with Content-Range, suffix ranges, 416 past the end, If-Range mismatch sends all', async t => {
    const { app, put } = await filesApp(t)
    put('chat-a', 'digits.txt', '0123456789')
    const get = async (headers: Record<string, string>) => await app.inject({ url: '/files/chat-a/digits.txt', headers: { ...bearer(KEY), ...headers } })
    let res = await get({ range: 'bytes=2-5' })
    t.equal(res.statusCode, 206)
    t.equal(res.body, '2345')
    t.equal(res.headers['content-range'], 'bytes 2-5/10')
    t.equal(res.headers['content-length'], '4')
    res = await get({ range: 'bytes=-3' })
    t.equal(res.body, '789')
    res = await get({ range: 'bytes=7-' })
    t.equal(res.body, '789')
    res = await get({ range: 'bytes=8-100' })
    t.equal(res.body, '89')
    res = await get({ range: 'bytes=10-' })
    t.equal(res.statusCode, 416)
    t.equal(res.headers['content-range'], 'bytes */10')
    t.equal(res.json().error, 'range_not_satisfiable')
    res = await get({ range: 'bytes=0-1,4-5' })
    t.equal(res.statusCode, 200, 'several ranges: the whole file')
    t.equal(res.body, '0123456789')
    res = await get({ range: 'bytes=2-3', 'if-range': '"stale"' })
    t.equal(res.statusCode, 200)
    const etag = (await get({})).headers.etag as string
    res = await get({ range: 'bytes=2-3', 'if-range': etag })
    t.equal(res.statusCode, 206)
  })

  t.test('conditional GET answers 304 for a matching ETag or Last-Modified', async t => {
    const { app, put } = await filesApp(t)
    put('chat-a', 'a.txt', 'abc', 1_700_000_000)
    const first = await app.inject({ url: '/files/chat-a/a.txt', headers: bearer(KEY) })
    const etag = first.headers.etag as string
    t.equal((await app.inject({ url: '/files/chat-a/a.txt', headers: { ...bearer(KEY), 'if-none-match': etag } })).statusCode, 304)
    t.equal((await app.inject({ url: '/files/chat-a/a.txt', headers: { ...bearer(KEY), 'if-none-match': '"other"' } })).statusCode, 200)
    t.equal((await app.inject({ url: '/files/chat-a/a.txt', headers: { ...bearer(KEY), 'if-modified-since': first.headers['last-modified'] as string } })).statusCode, 304)
  })

  t.test('HEAD answers like GET without a body', async t => {
    const { app, put } = await filesApp(t)
    put('chat-a', 'a.txt', 'abcdef')
    const res = await app.inject({ method: 'HEAD', url: '/files/chat-a/a.txt', headers: bearer(KEY) })
    t.equal(res.statusCode, 200)
    t.equal(res.headers['content-length'], '6')
    t.equal(res.body, '')
    t.equal((await app.inject({ method: 'HEAD', url: '/files/chat-a/nope.txt', headers: bearer(KEY) })).statusCode, 404)
  })

  t.test('errors: missing file 404, directory 400, bad path 400, missing outputs 404', async t => {
    const { app, put, outputs } = await filesApp(t)
    t.equal((await app.inject({ url: '/files/none/a.txt', headers: bearer(KEY) })).statusCode, 404, 'no outputs dir')
    put('chat-a', 'dir/x.txt', 'x')
    mkdirSync(`${outputs('chat-a')}/empty`)
    let res = await app.inject({ url: '/files/chat-a/missing.txt', headers: bearer(KEY) })
    t.equal(res.statusCode, 404)
    t.equal(res.json().error, 'path_not_found')
    res = await app.inject({ url: '/files/chat-a/dir', headers: bearer(KEY) })
    t.equal(res.statusCode, 400)
    t.equal(res.json().error, 'path_is_directory')
    res = await app.inject({ url: '/files/chat-a/dir//x.txt', headers: bearer(KEY) })
    t.equal(res.statusCode, 400)
    t.equal(res.json().error, 'invalid_path')
    res = await app.inject({ url: '/files/chat-a/', headers: bearer(KEY) })
    t.equal(res.statusCode, 400)
  })

  t.test('a root file named archive is reachable with ?raw=1; without it /archive is the zip', async t => {
    const { app, put } = await filesApp(t)
    put('chat-a', 'archive', 'i am a file')
    const raw = await app.inject({ url: '/files/chat-a/archive?raw=1', headers: bearer(KEY) })
    t.equal(raw.statusCode, 200)
    t.equal(raw.body, 'i am a file')
    const zip = await app.inject({ url: '/files/chat-a/archive', headers: bearer(KEY) })
    t.equal(zip.headers['content-type'], 'application/zip')
    t.equal(zip.rawPayload.subarray(0, 2).toString('latin1'), 'PK')
  })

  t.test('preflight OPTIONS allows GET, POST and the Authorization header to opaque-origin pages in protected mode', async t => {
    const { app } = await filesApp(t)
    for (const url of ['/files/chat-a/x.txt', '/api/outputs/chat-a']) {
      const res = await app.inject({ method: 'OPTIONS', url, headers: { origin: 'null', 'access-control-request-method': 'GET' } })
      t.equal(res.statusCode, 204, url)
      t.equal(res.headers['access-control-allow-origin'], 'null')
      t.equal(res.headers['access-control-allow-methods'], 'GET, POST, OPTIONS')
      t.equal(res.headers['access-control-allow-headers'], 'Authorization, Content-Type')
      t.notOk(res.headers['access-control-allow-credentials'])
    }
  })

  t.test('unsupported methods on a file path answer 405 with Allow', async t => {
    const { app } = await filesApp(t)
    const res = await app.inject({ method: 'DELETE', url: '/files/chat-a/x.txt', headers: bearer(KEY) })
    t.equal(res.statusCode, 405)
    t.match(res.headers.allow, /GET/)
  })

  t.test('open mode serves files without credentials', async t => {
    const { app, put } = await filesApp(t, {}, true)
    put('chat-a', 'a.txt', 'open')
    const res = await app.inject({ url: '/files/chat-a/a.txt' })
    t.equal(res.statusCode, 200)
    t.equal(res.body, 'open')
  })

  t.test('CORS: chat files are readable by our own origins and, with a token, by opaque-origin pages; never *', async t => {
    const { app, put } = await filesApp(t, { ALLOWED_ORIGINS: 'https://chat.example' })
    put('chat-a', 'data.json', '{"a":1}')
    const token = app.links.token('chat-a', 'f') as string
    const cors = async (url: string, origin: string): Promise<unknown> => (await app.inject({ url, headers: { origin } })).headers['access-control-allow-origin']
    // An agent page under /files (served with CSP sandbox: origin null) fetching a sibling by a relative URL keeps the ~token.
    t.equal(await cors(`/files/chat-a/~${token}/data.json`, 'null'), 'null', 'null with the token in the path')
    t.equal(await cors(`/api/outputs/chat-a?t=${token}`, 'null'), 'null', 'null with the token in the query')
    t.equal(await cors('/api/outputs/chat-a', 'null'), undefined, 'null without a credential')
    t.equal(await cors(`/files/chat-a/~${token}/data.json`, 'https://evil.example'), undefined, 'a foreign origin, even with a token')
    t.equal(await cors(`/files/chat-a/~${token}/data.json`, 'https://chat.example'), 'https://chat.example', 'ALLOWED_ORIGINS')
    t.equal(await cors(`/files/chat-a/~${token}/data.json`, 'http://cubicle.test'), 'http://cubicle.test', 'the public origin')

    const open = await filesApp(t, {}, true)
    open.put('default', 'data.json', '{"a":1}')
    for (const url of ['/files/default/data.json', '/files/default/archive', '/api/outputs/default']) {
      for (const origin of ['null', 'https://evil.example']) {
        const res = await open.app.inject({ url, headers: { origin } })
        t.equal(res.headers['access-control-allow-origin'], undefined, `open mode: ${url} from ${origin} is not readable by the page`)
      }
    }
    const pre = await open.app.inject({ method: 'OPTIONS', url: '/files/default/data.json', headers: { origin: 'null', 'access-control-request-method': 'GET' } })
    t.equal(pre.headers['access-control-allow-origin'], undefined, 'open mode: nor after a preflight')
  })
})

/*
 * The check-then-open race of docs/contract.md#path-rules, made deterministic: the path is resolved (or the tree walked)
 * while it is a regular file, then swapped for a symlink before the open. Only the fd verification stands
 * between that swap and a foreign file.
 */
t.test('fd-verify', async t => {
  function tree (t: Test): { dataDir: string, outputs: string, outside: string } {
    const dataDir = mkdtempSync(join(tmpdir(), 'cubicle-fd-'))
    t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
    const outputs = chatPaths(dataDir, 'chat-a').outputs
    const outside = join(dataDir, 'outside')
    mkdirSync(join(outputs, 'dir'), { recursive: true })
    mkdirSync(outside)
    writeFileSync(join(outputs, 'dir', 'f.txt'), 'inside')
    writeFileSync(join(outside, 'f.txt'), 'OUTSIDE-SECRET')
    return { dataDir, outputs, outside }
  }

  t.test('a file swapped for a symlink after the path check is refused at open (O_NOFOLLOW)', async t => {
    const { outputs, outside } = tree(t)
    const abs = await resolveInside(outputs, ['dir', 'f.txt'])
    unlinkSync(abs)
    symlinkSync(join(outside, 'f.txt'), abs)
    await t.rejects(openVerified(outputs, abs), { statusCode: 403, code: 'CORE_FORBIDDEN' })
  })

  t.test('a parent dir swapped for a symlink after the path check is refused by the /proc/self/fd check', async t => {
    const { outputs, outside } = tree(t)
    const abs = await resolveInside(outputs, ['dir', 'f.txt'])
    renameSync(join(outputs, 'dir'), join(outputs, 'moved'))
    symlinkSync(outside, join(outputs, 'dir'))
    await t.rejects(openVerified(outputs, abs), { statusCode: 403, code: 'CORE_FORBIDDEN' })
  })

  t.test('the archive re-verifies each file when it streams it: a swap after the walk aborts, never leaks', async t => {
    const { dataDir, outputs, outside } = tree(t)
    const links = createLinkService({ apiKey: TEST_API_KEY, signingKey: '', tokenTtlSeconds: 86400, publicBaseUrl: 'http://x' })
    const service = createFilesService({ links, storage: createChatStorage({ dataDir }), log: Fastify({ logger: false }).log }, parseOptions(FilesOptions, {
      archiveMaxBytes: 1e9, archiveMaxFiles: 100, listingMaxEntries: 100, listingScanLimit: 1000, frameAncestors: '*'
    }, 'files'))
    const stream = await service.archive('chat-a')
    // The walk saw a regular file; now the sandbox swaps the parent dir for a symlink to a foreign dir.
    renameSync(join(outputs, 'dir'), join(outputs, 'moved'))
    symlinkSync(outside, join(outputs, 'dir'))
    const chunks: Buffer[] = []
    const error = await new Promise<unknown>(resolve => {
      stream.on('data', (c: Buffer) => chunks.push(c))
      stream.on('error', resolve)
      stream.on('end', () => resolve(undefined))
    })
    t.ok(error, 'the stream fails')
    t.notOk(Buffer.concat(chunks).includes('OUTSIDE-SECRET'), 'the foreign file never reaches the zip')
  })

  t.test('the download route opens by fd: an inner symlink to a file inside outputs is allowed, one outside is 403', async t => {
    const { dataDir, outputs, outside } = tree(t)
    const links = createLinkService({ apiKey: TEST_API_KEY, signingKey: '', tokenTtlSeconds: 86400, publicBaseUrl: 'http://x' })
    const service = createFilesService({ links, storage: createChatStorage({ dataDir }), log: Fastify({ logger: false }).log }, parseOptions(FilesOptions, {
      archiveMaxBytes: 1e9, archiveMaxFiles: 100, listingMaxEntries: 100, listingScanLimit: 1000, frameAncestors: '*'
    }, 'files'))
    symlinkSync('dir/f.txt', join(outputs, 'alias.txt'))
    symlinkSync(join(outside, 'f.txt'), join(outputs, 'escape.txt'))
    const { handle } = await service.open('chat-a', ['alias.txt'])
    t.equal((await handle.readFile()).toString(), 'inside')
    await handle.close()
    await t.rejects(service.open('chat-a', ['escape.txt']), { statusCode: 403, code: 'CORE_FORBIDDEN' })
  })
})

t.test('listing', async t => {
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
})

// N listings of one chat cost one walk; the cache is short-lived and bounded by bytes.
t.test('listing-cache', async t => {
  function clock (): { now: () => number, advance: (ms: number) => void } {
    let at = 1_000_000
    return { now: () => at, advance: ms => { at += ms } }
  }

  function deferred (): { promise: Promise<Produced>, resolve: (p: Produced) => void, reject: (err: Error) => void } {
    let resolve!: (p: Produced) => void
    let reject!: (err: Error) => void
    const promise = new Promise<Produced>((_resolve, _reject) => { resolve = _resolve; reject = _reject })
    return { promise, resolve, reject }
  }

  t.test('concurrent gets for one key share one produce call and one buffer', async t => {
    const cache = createListingCache({ ttlMs: 0, maxBytes: 1 << 20 })
    let calls = 0
    const walk = deferred()
    const produce = async (): Promise<Produced> => { calls++; return await walk.promise }
    const gets = Array.from({ length: 100 }, async () => await cache.get('chat-a', produce))
    const other = cache.get('chat-b', async () => { calls++; return { body: Buffer.from('b'), costMs: 0 } })
    walk.resolve({ body: Buffer.from('listing a'), costMs: 5 })
    const bodies = await Promise.all(gets)
    t.equal(calls, 2, 'one walk for the 100 gets of chat-a, one for chat-b')
    t.ok(bodies.every(b => b === bodies[0]), 'every waiter got the same buffer object')
    t.equal((await other).toString(), 'b')
    await cache.get('chat-a', produce)
    t.equal(calls, 3, 'ttl 0: single flight only, a later get walks again')
  })

  t.test('a finished listing is reused for ttlMs, or twice its walk time when longer', async t => {
    const { now, advance } = clock()
    const cache = createListingCache({ ttlMs: 2000, maxBytes: 1 << 20, now })
    let calls = 0
    const produce = (costMs: number) => async (): Promise<Produced> => { calls++; return { body: Buffer.from(`v${calls}`), costMs } }
    t.equal((await cache.get('a', produce(10))).toString(), 'v1')
    advance(1999)
    t.equal((await cache.get('a', produce(10))).toString(), 'v1', 'still fresh')
    advance(1)
    t.equal((await cache.get('a', produce(3000))).toString(), 'v2', 'expired after ttlMs')
    advance(5999)
    t.equal((await cache.get('a', produce(10))).toString(), 'v2', 'a 3 s walk is reused for 6 s')
    advance(1)
    t.equal((await cache.get('a', produce(10))).toString(), 'v3')
  })

  t.test('a failed walk rejects every waiter and is not cached', async t => {
    const cache = createListingCache({ ttlMs: 60_000, maxBytes: 1 << 20 })
    const walk = deferred()
    let calls = 0
    const failing = async (): Promise<Produced> => { calls++; return await walk.promise }
    const a = cache.get('a', failing)
    const b = cache.get('a', failing)
    walk.reject(new Error('busy'))
    await t.rejects(a, /busy/)
    await t.rejects(b, /busy/)
    t.equal(calls, 1)
    t.equal((await cache.get('a', async () => ({ body: Buffer.from('ok'), costMs: 0 }))).toString(), 'ok', 'the next get walks again')
  })

  t.test('bounded by bytes: least recently used chats go first; an oversized body is not cached', async t => {
    const cache = createListingCache({ ttlMs: 60_000, maxBytes: 300 })
    const body = (c: string, n = 100): (() => Promise<Produced>) => async () => ({ body: Buffer.alloc(n, c), costMs: 0 })
    await cache.get('a', body('a'))
    await cache.get('b', body('b'))
    await cache.get('c', body('c'))
    t.equal(cache.bytes, 300)
    await cache.get('a', body('x')) // a hit: a becomes most recent
    await cache.get('d', body('d'))
    t.equal(cache.bytes, 300, 'never above maxBytes')
    t.equal((await cache.get('b', body('B'))).toString()[0], 'B', 'b (least recent) was evicted')
    t.equal((await cache.get('a', body('y'))).toString()[0], 'a', 'a survived')
    await cache.get('huge', body('h', 301))
    t.ok(cache.bytes <= 300)
    t.equal((await cache.get('huge', body('H', 301))).toString()[0], 'H', 'not cached')
  })
})

// the listing keeps only the newest N of a walk, whatever order the walk yields them in.
t.test('newest', async t => {
  function random (seed: number): () => number {
    let s = seed
    return () => { s = (s * 1103515245 + 12345) % 2147483648; return s / 2147483648 }
  }

  t.test('keeps exactly the newest N, sorted newest first, ties broken by path', async t => {
    const rnd = random(42)
    for (const [count, capacity] of [[0, 5], [3, 5], [5, 5], [1000, 50], [20000, 5000]] as const) {
    // Few distinct mtimes, so ties are common and the path tie-break matters.
      const all: Kept[] = Array.from({ length: count }, (_, i) => ({ relPath: `d${Math.floor(rnd() * 50)}/f${i}`, size: i, mtimeMs: Math.floor(rnd() * 200) }))
      const heap = new NewestHeap(capacity)
      for (const e of all) heap.offer(e)
      const expected = [...all].sort(newerFirst).slice(0, capacity)
      t.same(heap.sorted(), expected, `${count} offered, capacity ${capacity}`)
      t.equal(heap.dropped > 0, count > capacity, 'dropped tells whether anything was cut')
    }
  })

  t.test('ascending, descending and equal mtimes', async t => {
    for (const order of ['ascending', 'descending', 'equal'] as const) {
      const heap = new NewestHeap(3)
      for (let i = 0; i < 10; i++) {
        const mtimeMs = order === 'ascending' ? i : order === 'descending' ? 10 - i : 7
        heap.offer({ relPath: `f${i}`, size: 0, mtimeMs })
      }
      const paths = heap.sorted().map(e => e.relPath)
      t.same(paths, order === 'ascending' ? ['f9', 'f8', 'f7'] : ['f0', 'f1', 'f2'], order)
    }
  })
})

// the semaphores behind the listing-walk and archive limits.
t.test('slots', async t => {
  t.test('grants up to max at once, hands a released slot to the oldest waiter', async t => {
    const slots = createSlots(2, 10)
    const a = await slots.acquire(0)
    const b = await slots.acquire(0)
    t.ok(a !== undefined && b !== undefined)
    t.equal(slots.active, 2)
    const order: string[] = []
    const c = slots.acquire(5000).then(r => { order.push('c'); return r })
    const d = slots.acquire(5000).then(r => { order.push('d'); return r })
    t.equal(slots.waiting, 2)
    a?.()
    a?.() // a second release of the same slot changes nothing
    const gotC = await c
    t.ok(gotC, 'the first waiter got the slot')
    t.same(order, ['c'])
    t.equal(slots.active, 2)
    t.equal(slots.waiting, 1)
    b?.()
    t.ok(await d)
    t.same(order, ['c', 'd'])
  })

  t.test('a waiter gives up after waitMs; waitMs 0 and a full queue answer at once', async t => {
    const slots = createSlots(1, 1)
    const held = await slots.acquire(0)
    t.equal(await slots.acquire(0), undefined, 'no wait requested')
    const started = Date.now()
    const queued = slots.acquire(150)
    t.equal(await slots.acquire(10_000), undefined, 'the queue (1) is full: refused without waiting')
    t.ok(Date.now() - started < 100)
    t.equal(await queued, undefined, 'timed out')
    t.ok(Date.now() - started >= 140)
    t.equal(slots.waiting, 0, 'the timed-out waiter left the queue')
    held?.()
    t.equal(slots.active, 0)
    t.ok(await slots.acquire(0), 'the slot is free again')
  })

  t.test('keyed slots: a limit per key, keys independent, idle keys forgotten', async t => {
    const slots = createKeyedSlots(1, 1)
    const a1 = await slots.acquire('a', 0)
    t.ok(a1)
    t.equal(await slots.acquire('a', 0), undefined, 'second slot of key a')
    const b1 = await slots.acquire('b', 0)
    t.ok(b1, 'key b is independent')
    t.equal(slots.size, 2)
    const a2 = slots.acquire('a', 5000)
    a1?.()
    const got = await a2
    t.ok(got, 'the waiter of key a got the freed slot')
    got?.()
    b1?.()
    t.equal(slots.size, 0, 'no state is kept for idle keys')
    const c1 = await slots.acquire('c', 0)
    t.equal(await slots.acquire('c', 20), undefined, 'timed out on a busy key')
    c1?.()
    t.equal(slots.size, 0, 'a timed-out waiter leaves no state behind either')
  })
})

// a walk is bounded in time even when the tree yields no file for a long stretch.
t.test('walk-budget', async t => {
  function tree (t: Test): string {
    const dir = mkdtempSync(join(tmpdir(), 'cubicle-walk-budget-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    return dir
  }

  t.test('a tree of thousands of empty dirs (no yields) still answers at the budget; settled comes later', async t => {
    const root = tree(t)
    for (let i = 0; i < 3000; i++) mkdirSync(join(root, `d${i}`, 'e'), { recursive: true })
    mkdirSync(join(root, 'zz'))
    writeFileSync(join(root, 'zz', 'last.txt'), 'x') // the walk reaches it last
    let visited = 0
    const started = Date.now()
    const walk = await walkWithin(root, { skipDot: true }, 20, () => { visited++; return true })
    const answeredAfter = Date.now() - started
    t.equal(walk.outOfTime, true)
    t.equal(visited, 0, 'no file was reached before the budget')
    t.ok(answeredAfter < 1000, `answered after ${answeredAfter} ms`)
    await walk.settled
    t.pass('the walker stopped afterwards')
  })

  t.test('visit returning false stops the walk; a complete walk is not out of time', async t => {
    const root = tree(t)
    for (let i = 0; i < 10; i++) writeFileSync(join(root, `f${i}`), '')
    let seen = 0
    const stopped = await walkWithin(root, {}, 60_000, () => ++seen < 3)
    t.equal(seen, 3)
    t.equal(stopped.outOfTime, false)
    const names: string[] = []
    const full = await walkWithin(root, {}, 60_000, e => { names.push(e.relPath); return true })
    t.equal(full.outOfTime, false)
    t.equal(names.length, 10)
  })

  t.test('a throw from visit ends the walk and propagates', async t => {
    const root = tree(t)
    for (let i = 0; i < 5; i++) writeFileSync(join(root, `f${i}`), '')
    let seen = 0
    await t.rejects(walkWithin(root, {}, 60_000, () => { if (++seen === 2) throw new Error('too many'); return true }), /too many/)
    t.equal(seen, 2)
  })
})
