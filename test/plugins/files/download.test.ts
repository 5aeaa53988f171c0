import t from 'tap'
import { mkdirSync } from 'node:fs'
import { bearer, filesApp, KEY } from './setup.js'

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
