// Files and uploads over real HTTP: hostile paths, archive limits, uploads, one group per part, all in one test process (docs/testing.md#the-unit-tiers-time).
import t, { type Test } from 'tap'
import { connect } from 'node:net'
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync, readdirSync, readlinkSync, realpathSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { entry, buildApp } from '../../core/app.js'
import { chatPaths } from '../../core/chat-paths.js'
import capabilities from '../../plugins/capabilities/index.js'
import files from '../../plugins/files/index.js'
import chatStorage from '../../plugins/chat-storage/index.js'
import preview from '../../plugins/preview/index.js'
import { listen, TEST_API_KEY } from '../helper.js'
import { randomFillSync, createHash, randomBytes } from 'node:crypto'
import { request, type ClientRequest, type IncomingMessage } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FilesOptions } from '../../plugins/files/schemas.js'
import { readZip } from '../plugins/files/zip-reader.js'
import { readdir, readFile, stat, symlink, utimes, writeFile } from 'node:fs/promises'
import type { FastifyInstance } from 'fastify'
import { loadConfig } from '../../core/config.js'
import promptRender from '../../plugins/prompt-render/index.js'
import uploads from '../../plugins/uploads/index.js'
import { fakeSandbox, type FakeSandboxLog } from '../fixtures/tiers-app.js'
import { tempDir } from '../fixtures/temp-dir.js'

/*
 * The hidden-path attack list (docs/contract.md#path-rules) over a real socket, so paths reach the server byte for
 * byte (no client-side normalisation of `..` or `%2e`). Every case runs against every route shape with
 * the master key AND with a files token: nothing outside the chat's outputs dir may ever come back.
 */
t.test('files-attacks', async t => {
  const KEY = TEST_API_KEY
  const short = (p: string): string => p.length > 80 ? `${p.slice(0, 60)}…(${p.length} chars)` : p
  const MARKERS = ['root:x:0:', 'OTHER-CHAT-SECRET', 'DATA-DIR-SECRET', 'META-SECRET', 'UPLOAD-SECRET']

  /** One raw HTTP/1.1 exchange: the path is sent exactly as given. */
  async function raw (port: number, path: string, auth?: string): Promise<{ status: number, body: string }> {
    return await new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1')
      const chunks: Buffer[] = []
      socket.on('data', c => chunks.push(c))
      socket.on('error', reject)
      socket.on('end', () => {
        const text = Buffer.concat(chunks).toString('latin1')
        resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), body: text })
      })
      socket.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\n${auth === undefined ? '' : `Authorization: Bearer ${auth}\r\n`}Connection: close\r\n\r\n`)
    })
  }

  t.test('hidden-path attack list: nothing outside the chat outputs dir is ever returned', async t => {
    const dataDir = mkdtempSync(join(tmpdir(), 'cubicle-attacks-'))
    t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
    const victim = chatPaths(dataDir, 'victim')
    const other = chatPaths(dataDir, 'other')
    mkdirSync(victim.outputs, { recursive: true })
    mkdirSync(victim.uploads, { recursive: true })
    mkdirSync(other.outputs, { recursive: true })
    writeFileSync(join(victim.outputs, 'ok.txt'), 'VICTIM-OK')
    writeFileSync(join(other.outputs, 'other-secret.txt'), 'OTHER-CHAT-SECRET')
    writeFileSync(join(dataDir, 'secret.txt'), 'DATA-DIR-SECRET')
    writeFileSync(victim.meta, 'META-SECRET')
    writeFileSync(join(victim.uploads, 'upload.txt'), 'UPLOAD-SECRET')
    mkdirSync(join(victim.outputs, 'dir'))
    // What a sandbox can plant in its own outputs dir (the server sees host paths, the sandbox container ones).
    const links: Record<string, string> = {
      etc: '/etc',
      passwd: '/etc/passwd',
      root: '/',
      other: other.outputs,
      otherfile: join(other.outputs, 'other-secret.txt'),
      'other-relative': `../../${other.key}/outputs`,
      secret: join(dataDir, 'secret.txt'),
      up: '..',
      meta: '../meta.json',
      uploads: '../uploads',
      loop: 'loop',
      dangling: '/nonexistent/file',
      'dir/deep': '../../..',
      archive: '/etc/passwd',
      'report.html': '/etc/passwd'
    }
    for (const [name, target] of Object.entries(links)) symlinkSync(target, join(victim.outputs, name))

    const { app, url } = await listen(t, { DATA_DIR: dataDir, MCP_API_KEY: KEY }, config => [
      entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: '', tokenTtlSeconds: config.LINK_TOKEN_TTL, publicBaseUrl: config.publicBaseUrl }),
      entry(chatStorage, { dataDir: config.DATA_DIR }),
      entry(files, {}),
      entry(preview, {})
    ])
    const port = Number(new URL(url).port)
    const token = app.links.token('victim', 'f') as string
    const long = 'a'.repeat(300)

    // [path after /files/victim/, expected status]
    const fileCases: Array<[string, number]> = [
      ['../../etc/passwd', 400], ['..%2f..%2fetc%2fpasswd', 400], ['%2e%2e/%2e%2e/etc/passwd', 400],
      ['%2e%2e%2f%2e%2e%2fetc%2fpasswd', 400], ['%252e%252e/%252e%252e/etc/passwd', 404], ['..%252f..%252fetc%252fpasswd', 404],
      ['..\\..\\etc\\passwd', 400], ['..%5c..%5cetc%5cpasswd', 400], ['%5c..%5c..%5cetc%5cpasswd', 400],
      ['/etc/passwd', 400], ['%2fetc%2fpasswd', 400], ['ok.txt%00.png', 400], ['ok.txt%00', 400], ['..%00/etc/passwd', 400],
      ['.%2e/.%2e/etc/passwd', 400], ['%2e./%2e./etc/passwd', 400], ['....//....//etc/passwd', 400], ['..;/..;/etc/passwd', 404],
      ['%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd', 400], ['%e0%80%ae%e0%80%ae/etc/passwd', 400], ['./ok.txt', 400], ['ok.txt/..', 400],
      ['ok.txt/', 400], ['dir/', 400], [long, 400], [`${'ab/'.repeat(400)}x`, 400], ['%01ok.txt', 400], ['ok%7f.txt', 400], ['ok%0a.txt', 400],
      ['etc/passwd', 403], ['passwd', 403], ['root/etc/passwd', 403], ['other/other-secret.txt', 403], ['otherfile', 403],
      ['other-relative/other-secret.txt', 403], ['secret', 403], ['up/meta.json', 403], ['meta', 403], ['uploads/upload.txt', 403],
      ['up/uploads/upload.txt', 403], ['loop', 403], ['dangling', 403], ['dir/deep/secret.txt', 403], ['archive?raw=1', 403],
      ['report.html', 403], ['dir/deep', 403], ['up', 403], ['archive/../../etc/passwd', 400], ['dir/..%2f..%2f..%2fsecret.txt', 400],
      ['~v1.f.99999999999.AAAAAAAAAAAAAAAAAAAAAA/../../etc/passwd', 400], ['ok.txt', 200]
    ]
    // Whole paths (chat segment attacks and the other routes).
    const pathCases: Array<[string, number]> = [
      ['/files/%2e%2e/etc/passwd', 400], ['/files/../etc/passwd', 400], ['/files/..%2f..%2fetc/passwd', 400],
      ['/files/victim%2f..%2fother/other-secret.txt', 400], ['/files/victim%00/ok.txt', 400], [`/files/${'a'.repeat(65)}/ok.txt`, 400],
      ['/files/%c0%ae%c0%ae/x', 400], ['/files/.victim/ok.txt', 400], ['/files/victim%20/ok.txt', 200], ['/files/VICTIM/ok.txt', 200],
      [`/files/${'a'.repeat(5000)}/x`, 414],
      ['/api/outputs/..%2fother', 400], ['/api/outputs/%2e%2e', 400], ['/api/outputs/victim%2f..%2fother', 400], ['/api/outputs/other%00', 400],
      ['/preview/..%2fapi', 400], ['/preview/%3cscript%3e', 400], ['/preview/a%2f..%2fb', 400]
    ]
    let cases = 0
    for (const [creds, prefix] of [['key', '/files/victim/'], ['token', `/files/victim/~${token}/`]] as const) {
      for (const [path, expected] of fileCases) {
        const res = await raw(port, prefix + path, creds === 'key' ? KEY : undefined)
        cases++
        t.equal(res.status, expected, `${creds}: ${short(path)}`)
        for (const marker of MARKERS) t.notOk(res.body.includes(marker), `${creds}: ${short(path)} does not leak ${marker}`)
      }
    }
    for (const [path, expected] of pathCases) {
      const res = await raw(port, path, KEY)
      cases++
      t.equal(res.status, expected, short(path))
      for (const marker of MARKERS) t.notOk(res.body.includes(marker), `${short(path)} does not leak ${marker}`)
    }
    // The listing and the archive see the same tree: only ok.txt is a regular file inside.
    const listing = await raw(port, '/api/outputs/victim', KEY)
    t.equal(listing.status, 200)
    t.same((JSON.parse(listing.body.slice(listing.body.indexOf('\r\n\r\n') + 4).replace(/^[0-9a-f]+\r\n|\r\n[0-9a-f]+\r\n|\r\n0\r\n\r\n$/g, '')) as { files: Array<{ path: string }> }).files.map(f => f.path), ['ok.txt'])
    const archive = await raw(port, `/files/victim/~${token}/archive`)
    t.equal(archive.status, 200)
    for (const marker of MARKERS) t.notOk(archive.body.includes(marker), `archive does not leak ${marker}`)
    t.ok(cases >= 80, `${cases} attack requests`)
  })
})

/*
 * archive amplification over a real socket. One archive per chat and a global limit
 * (429 with Retry-After after a short wait), and a reader that stops reading cannot keep a descriptor of
 * the outputs dir or an archive slot: a client that goes away closes them at once, a stalled one is cut off.
 */
t.test('files-archive-limits', async t => {
  const KEY = TEST_API_KEY
  const MIB = 1024 * 1024
  // Stored (.mp4), incompressible and larger than loopback socket buffers: the archive cannot finish unread.
  const BIG = 24 * MIB

  async function server (t: Test, options: Partial<FilesOptions>): Promise<{ url: string, outputs: (chat: string) => string }> {
    const dataDir = mkdtempSync(join(tmpdir(), 'cubicle-archive-limits-'))
    t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
    const data = randomFillSync(Buffer.alloc(BIG))
    for (const chat of ['chat-a', 'chat-b']) {
      const dir = chatPaths(dataDir, chat).outputs
      mkdirSync(dir, { recursive: true })
      writeFileSync(join(dir, 'video.mp4'), data)
    }
    const { url } = await listen(t, { DATA_DIR: dataDir, MCP_API_KEY: KEY }, config => [
      entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: '', tokenTtlSeconds: 86400, publicBaseUrl: config.publicBaseUrl }),
      entry(chatStorage, { dataDir: config.DATA_DIR }),
      entry(files, { archiveWaitMs: 300, ...options })
    ])
    return { url, outputs: chat => realpathSync(chatPaths(dataDir, chat).outputs) }
  }

  /** Starts an archive download and stops reading once the headers are in. */
  async function stalled (url: string, chat: string): Promise<{ req: ClientRequest, res: IncomingMessage }> {
    return await new Promise((resolve, reject) => {
      const req = request(`${url}/files/${chat}/archive`, { headers: { authorization: `Bearer ${KEY}` } }, res => {
        res.pause()
        resolve({ req, res })
      })
      req.on('error', reject).end()
    })
  }

  async function fetchArchive (url: string, chat: string): Promise<{ status: number, headers: Record<string, unknown>, body: Buffer }> {
    const res = await fetch(`${url}/files/${chat}/archive`, { headers: { authorization: `Bearer ${KEY}` } })
    return { status: res.status, headers: Object.fromEntries(res.headers), body: Buffer.from(await res.arrayBuffer()) }
  }

  /** Descriptors of this process that point into `dir` (the server runs in this process). */
  function openBelow (dir: string): number {
    let n = 0
    for (const fd of readdirSync('/proc/self/fd')) {
      try { if (readlinkSync(`/proc/self/fd/${fd}`).startsWith(`${dir}/`)) n++ } catch {}
    }
    return n
  }

  async function until (what: () => boolean, ms: number): Promise<boolean> {
    for (const end = Date.now() + ms; Date.now() < end; await sleep(20)) if (what()) return true
    return what()
  }

  t.test('one archive per chat: a second one waits, then 429 archive_in_progress; a client that leaves frees it at once', async t => {
    const { url, outputs } = await server(t, {})
    const first = await stalled(url, 'chat-a')
    t.equal(first.res.statusCode, 200)
    t.ok(await until(() => openBelow(outputs('chat-a')) === 1, 2000), 'the streaming archive holds one descriptor')
    const started = Date.now()
    const second = await fetchArchive(url, 'chat-a')
    t.equal(second.status, 429)
    t.ok(Date.now() - started >= 250, 'it waited (archiveWaitMs) before giving up')
    t.equal(second.headers['retry-after'], '10')
    t.same(JSON.parse(second.body.toString()), {
      error: 'archive_in_progress', detail: 'an archive of this chat is already being downloaded; retry in 10 s, when it has finished', retry_after: 10
    })
    t.equal((await fetchArchive(url, 'chat-b')).status, 200, 'another chat is not limited by it')
    first.req.destroy()
    t.ok(await until(() => openBelow(outputs('chat-a')) === 0, 2000), 'the descriptor is closed when the client goes away')
    const third = await fetchArchive(url, 'chat-a')
    t.equal(third.status, 200, 'and the chat can download again')
    t.same(readZip(third.body).map(e => [e.name, e.size]), [['video.mp4', BIG]])
  })

  t.test('a global limit across chats: 429 server_busy after the wait, free again when the first ends', async t => {
    const { url } = await server(t, { archivesMax: 1 })
    const first = await stalled(url, 'chat-a')
    const busy = await fetchArchive(url, 'chat-b')
    t.equal(busy.status, 429)
    t.equal(busy.headers['retry-after'], '10')
    t.equal(JSON.parse(busy.body.toString()).error, 'server_busy')
    first.req.destroy()
    let status = 0
    for (const end = Date.now() + 5000; status !== 200 && Date.now() < end;) status = (await fetchArchive(url, 'chat-b')).status
    t.equal(status, 200, 'the global slot came back when the first client went away')
  })

  t.test('a reader that stops reading is cut off by the watchdog; descriptor and slot come back', async t => {
    const { url, outputs } = await server(t, { archiveStallMs: 1000 })
    const { res } = await stalled(url, 'chat-a')
    t.ok(await until(() => openBelow(outputs('chat-a')) === 1, 2000), 'streaming, one descriptor open')
    t.ok(await until(() => openBelow(outputs('chat-a')) === 0, 8000), 'the server cut the stalled download off and closed its descriptor')
    // Reading again now drains what the sockets buffered, then meets the cut: never the whole archive.
    const received = await new Promise<number>(resolve => {
      let bytes = 0
      res.on('data', (c: Buffer) => { bytes += c.length })
      res.on('close', () => { resolve(bytes) })
      res.resume()
    })
    t.ok(received < BIG, `the client got ${(received / MIB).toFixed(1)} MiB of ${BIG / MIB} MiB, then the end`)
    const again = await fetchArchive(url, 'chat-a')
    t.equal(again.status, 200, 'the chat slot was released')
    t.equal(readZip(again.body)[0]?.size, BIG, 'a reader that keeps reading gets the whole archive under the same watchdog')
  })
})

t.test('uploads-http', async t => {
  const KEY = TEST_API_KEY

  async function server (t: Test, env: Record<string, string> = {}): Promise<{ app: FastifyInstance, url: string, dataDir: string, sandbox: FakeSandboxLog }> {
    const dataDir = await tempDir(t, 'uploads')
    const config = loadConfig({ LOG_LEVEL: 'silent', PUBLIC_BASE_URL: 'http://cubicle.test', DATA_DIR: dataDir, SANDBOX_POOL_SIZE: '0', ...env })
    const sandbox: FakeSandboxLog = { files: new Map(), writes: 0, touched: [] }
    const app = await buildApp(config, [
      entry(fakeSandbox(sandbox), {}),
      entry(capabilities, { apiKey: config.MCP_API_KEY, publicBaseUrl: config.publicBaseUrl }),
      entry(promptRender, {}),
      entry(chatStorage, { dataDir: config.DATA_DIR }),
      entry(uploads, { maxBytes: config.UPLOAD_MAX_BYTES })
    ], { logger: false })
    t.teardown(async () => { await app.close() })
    const url = await app.listen({ port: 0, host: '127.0.0.1' })
    return { app, url, dataDir, sandbox }
  }

  function form (content: Buffer | string, field = 'file', name = 'upload.bin'): FormData {
    const fd = new FormData()
    fd.append('note', 'ignored field')
    fd.append(field, new Blob([content]), name)
    return fd
  }

  async function upload (url: string, chat: string, path: string, body: FormData | string, headers: Record<string, string> = {}): Promise<{ status: number, json: Record<string, unknown> }> {
    const res = await fetch(`${url}/api/uploads/${chat}/${path}`, { method: 'POST', body, headers })
    return { status: res.status, json: await res.json() as Record<string, unknown> }
  }

  const md5 = (b: Buffer | string): string => createHash('md5').update(b).digest('hex')

  /** A multipart upload to a request target sent exactly as given (no URL normalisation). */
  async function rawUpload (url: string, target: string, content: string): Promise<number> {
    const boundary = 'xBOUNDARYx'
    const body = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n\r\n${content}\r\n--${boundary}--\r\n`
    const { port } = new URL(url)
    return await new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path: target, method: 'POST', headers: { 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': Buffer.byteLength(body) } }, res => {
        res.resume()
        resolve(res.statusCode ?? 0)
      })
      req.on('error', reject)
      req.end(body)
    })
  }

  t.test('a text upload is stored with its md5, listed and in the manifest', async t => {
    const { url, dataDir, sandbox } = await server(t)
    const res = await upload(url, 'chat-a', 'notes.txt', form('hello uploads\n'))
    t.equal(res.status, 200)
    t.same(sandbox.touched, ['chat-a'], 'an upload keeps the chat\'s sandbox alive (a declared dependency)')
    t.same(res.json, { status: 'success', filename: 'notes.txt', size: 14, md5: md5('hello uploads\n') })
    const dir = chatPaths(dataDir, 'chat-a').uploads
    t.equal(await readFile(join(dir, 'notes.txt'), 'utf8'), 'hello uploads\n')
    t.equal((await stat(join(dir, 'notes.txt'))).mode & 0o777, 0o644, 'readable by the sandbox user')
    t.equal((await stat(dir)).mode & 0o777, 0o755)
    const list = await fetch(`${url}/api/uploads/chat-a/list`)
    t.equal(list.headers.get('cache-control'), 'no-cache, no-store, must-revalidate')
    t.equal(list.headers.get('access-control-allow-origin'), null, 'no Origin, no CORS header (never *)')
    const body = await list.json() as { files: Array<Record<string, unknown>>, total: number }
    t.equal(body.total, 1)
    t.match(body.files[0], { name: 'notes.txt', path: 'notes.txt', size: 14, container_path: '/mnt/user-data/uploads/notes.txt' })
    t.ok(Math.abs((body.files[0]?.modified as number) - Date.now() / 1000) < 60, 'modified in Unix seconds')
    const manifest = await (await fetch(`${url}/api/uploads/chat-a/manifest`)).json()
    t.same(manifest, { 'notes.txt': md5('hello uploads\n') })
  })

  t.test('a binary upload arrives byte for byte', async t => {
    const { url, dataDir } = await server(t)
    const data = randomBytes(3 * 1024 * 1024 + 7)
    const res = await upload(url, 'chat-a', 'blob.bin', form(data))
    t.equal(res.status, 200)
    t.equal(res.json.md5, md5(data))
    t.ok(data.equals(await readFile(join(chatPaths(dataDir, 'chat-a').uploads, 'blob.bin'))))
  })

  t.test('nested paths create their directories, also when the slash is percent-encoded', async t => {
    const { url, dataDir } = await server(t)
    t.equal((await upload(url, 'chat-a', 'sub/deeper/nested.json', form('{}'))).json.filename, 'sub/deeper/nested.json')
    t.equal((await upload(url, 'chat-a', 'enc%2Fname%20with%20space.txt', form('x'))).json.filename, 'enc/name with space.txt')
    const dir = chatPaths(dataDir, 'chat-a').uploads
    t.equal(await readFile(join(dir, 'sub', 'deeper', 'nested.json'), 'utf8'), '{}')
    t.equal(await readFile(join(dir, 'enc', 'name with space.txt'), 'utf8'), 'x')
    t.equal((await stat(join(dir, 'sub', 'deeper'))).mode & 0o777, 0o755)
  })

  t.test('traversal and malformed paths are refused with 400 and write nothing', async t => {
    const { url, dataDir } = await server(t)
    // Raw request targets: fetch would normalise %2e%2e away before it reaches the server.
    for (const path of ['%2e%2e/escape.txt', '..%2Fescape.txt', 'a/%2e%2e/%2e%2e/escape.txt', 'a/../../escape.txt', 'a%5Cb.txt', 'a%00b.txt', 'a//b.txt', '']) {
      const status = await rawUpload(url, `/api/uploads/chat-a/${path}`, 'x')
      t.equal(status, 400, `path ${JSON.stringify(path)}`)
    }
    const written = (await readdir(dataDir, { recursive: true })).filter(p => /escape|a.b\.txt/.test(p))
    t.same(written, [], 'nothing was written anywhere under DATA_DIR')
  })

  t.test('a symlink planted in the uploads dir is not followed on upload', async t => {
    const { url, dataDir } = await server(t)
    await upload(url, 'chat-a', 'first.txt', form('1'))
    const outside = await tempDir(t, 'outside')
    await symlink(outside, join(chatPaths(dataDir, 'chat-a').uploads, 'evil'))
    const res = await upload(url, 'chat-a', 'evil/pwned.txt', form('x'))
    t.equal(res.status, 403)
    t.same(await readdir(outside), [])
  })

  t.test('an oversize upload answers 413 payload_too_large with the limit and leaves no file behind', async t => {
    const { url, dataDir } = await server(t, { UPLOAD_MAX_BYTES: '1000' })
    const res = await upload(url, 'chat-a', 'big.bin', form(randomBytes(50_000)))
    t.equal(res.status, 413)
    t.match(res.json, { error: 'payload_too_large', limit: 1000, detail: /1000/ })
    t.same(await readdir(chatPaths(dataDir, 'chat-a').uploads), [], 'neither the file nor a temp file remains')
    const exact = await upload(url, 'chat-a', 'exact.bin', form(randomBytes(1000)))
    t.equal(exact.status, 200, 'exactly the limit is accepted')
    const over = await upload(url, 'chat-a', 'exact.bin', form(randomBytes(1001)))
    t.equal(over.status, 413, 'one byte over is refused')
    t.equal((await stat(join(chatPaths(dataDir, 'chat-a').uploads, 'exact.bin'))).size, 1000, 'the previous version survives')
  })

  t.test('re-uploading a path replaces it atomically and the manifest follows', async t => {
    const { url } = await server(t)
    await upload(url, 'chat-a', 'doc.txt', form('version one'))
    const first = await (await fetch(`${url}/api/uploads/chat-a/manifest`)).json() as Record<string, string>
    await upload(url, 'chat-a', 'doc.txt', form('version two!'))
    const second = await (await fetch(`${url}/api/uploads/chat-a/manifest`)).json() as Record<string, string>
    t.equal(first['doc.txt'], md5('version one'))
    t.equal(second['doc.txt'], md5('version two!'))
  })

  t.test('the manifest does not re-hash unchanged files but notices changed ones', async t => {
    const { url, dataDir } = await server(t)
    await upload(url, 'chat-a', 'a.txt', form('aaaa'))
    const file = join(chatPaths(dataDir, 'chat-a').uploads, 'a.txt')
    const when = new Date(1_700_000_000_000)
    await utimes(file, when, when)
    t.same(await (await fetch(`${url}/api/uploads/chat-a/manifest`)).json(), { 'a.txt': md5('aaaa') }, 'hashed once at the new mtime')
    // Same size, same inode, same mtime: only a re-hash could see the new bytes.
    await writeFile(file, 'bbbb')
    await utimes(file, when, when)
    t.same(await (await fetch(`${url}/api/uploads/chat-a/manifest`)).json(), { 'a.txt': md5('aaaa') }, 'cached md5 served')
    await utimes(file, when, new Date(when.getTime() + 5000))
    t.same(await (await fetch(`${url}/api/uploads/chat-a/manifest`)).json(), { 'a.txt': md5('bbbb') }, 'mtime change re-hashes')
  })

  t.test('list and manifest include hidden files, skip symlinks and sort newest first', async t => {
    const { url, dataDir } = await server(t)
    await upload(url, 'chat-a', 'old.txt', form('o'))
    await upload(url, 'chat-a', '.hidden', form('h'))
    await upload(url, 'chat-a', 'new.txt', form('n'))
    const dir = chatPaths(dataDir, 'chat-a').uploads
    await utimes(join(dir, 'old.txt'), new Date(1_000_000_000_000), new Date(1_000_000_000_000))
    await symlink('/etc/passwd', join(dir, 'passwd-link'))
    const list = await (await fetch(`${url}/api/uploads/chat-a/list`)).json() as { files: Array<{ path: string, modified: number }> }
    t.same(list.files.map(f => f.path).slice(-1), ['old.txt'])
    t.same(list.files.map(f => f.path).sort(), ['.hidden', 'new.txt', 'old.txt'])
    t.equal(list.files.at(-1)?.modified, 1_000_000_000)
    const manifest = await (await fetch(`${url}/api/uploads/chat-a/manifest`)).json() as Record<string, string>
    t.same(Object.keys(manifest).sort(), ['.hidden', 'new.txt', 'old.txt'])
  })

  t.test('a chat without uploads has an empty manifest and list', async t => {
    const { url } = await server(t)
    t.same(await (await fetch(`${url}/api/uploads/fresh/manifest`)).json(), {})
    t.same(await (await fetch(`${url}/api/uploads/fresh/list`)).json(), { files: [], total: 0 })
  })

  t.test('a body without the file field is 400, a non-multipart body is 415', async t => {
    const { url } = await server(t)
    const missing = await upload(url, 'chat-a', 'x.txt', form('x', 'other'))
    t.equal(missing.status, 400)
    t.equal(missing.json.error, 'missing_file')
    const json = await fetch(`${url}/api/uploads/chat-a/x.txt`, { method: 'POST', body: '{"a":1}', headers: { 'content-type': 'application/json' } })
    t.equal(json.status, 415)
  })

  t.test('protected mode: invalid chat 400, then 401, then 403 for a files token, 200 for control token or key', async t => {
    const { app, url } = await server(t, { MCP_API_KEY: KEY })
    t.equal((await upload(url, 'Bad..Chat', 'x.txt', form('x'))).json.error, 'invalid_chat_id')
    const anon = await upload(url, 'chat-a', 'x.txt', form('x'))
    t.equal(anon.status, 401)
    t.equal(anon.json.error, 'Unauthorized')
    const files = await upload(url, 'chat-a', 'x.txt', form('x'), { authorization: `Bearer ${app.links.token('chat-a', 'f') as string}` })
    t.equal(files.status, 403, 'a read-only files token cannot upload')
    const otherChat = await upload(url, 'chat-a', 'x.txt', form('x'), { authorization: `Bearer ${app.links.token('chat-b', 'c') as string}` })
    t.equal(otherChat.status, 403, 'another chat\'s control token cannot upload')
    t.equal((await upload(url, 'chat-a', 'x.txt', form('x'), { authorization: `Bearer ${app.links.token('chat-a', 'c') as string}` })).status, 200)
    t.equal((await upload(url, 'chat-a', `y.txt?t=${app.links.token('chat-a', 'c') as string}`, form('y'))).status, 200, 'token in the t query')
    t.equal((await upload(url, 'chat-a', 'z.txt', form('z'), { authorization: `Bearer ${KEY}` })).status, 200)
    t.equal((await fetch(`${url}/api/uploads/chat-a/manifest`)).status, 401)
    t.equal((await fetch(`${url}/api/uploads/chat-a/list`, { headers: { authorization: `Bearer ${app.links.token('chat-a', 'f') as string}` } })).status, 403)
    t.equal((await fetch(`${url}/api/uploads/chat-a/list`, { headers: { authorization: `Bearer ${KEY}` } })).status, 200)
  })

  t.test('CORS preflight is answered for upload routes, for allowed origins only', async t => {
    const { url } = await server(t, { MCP_API_KEY: KEY, ALLOWED_ORIGINS: 'https://ui.example' })
    const preflight = async (origin: string): Promise<Response> => await fetch(`${url}/api/uploads/chat-a/x.txt`, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST' } })
    const res = await preflight('https://ui.example')
    t.equal(res.status, 204)
    t.equal(res.headers.get('access-control-allow-origin'), 'https://ui.example')
    t.match(res.headers.get('access-control-allow-methods'), /POST/)
    t.equal(res.headers.get('access-control-allow-credentials'), null)
    t.equal((await preflight('https://evil.example')).headers.get('access-control-allow-origin'), null, 'a foreign origin gets no CORS header')
  })

  t.test('a page that may not use chat routes cannot upload, in open mode too', async t => {
    const { url, dataDir } = await server(t, { ALLOWED_ORIGINS: 'https://ui.example' })
    for (const origin of ['null', 'https://evil.example']) {
      const res = await upload(url, 'default', 'planted.txt', form('x'), { origin })
      t.equal(res.status, 403, `a multipart form POST from ${origin}`)
      t.equal(res.json.error, 'forbidden_origin')
    }
    await t.rejects(stat(join(chatPaths(dataDir, 'default').uploads, 'planted.txt')), { code: 'ENOENT' }, 'nothing was written')
    t.equal((await upload(url, 'default', 'ok.txt', form('ok'), { origin: 'https://ui.example' })).status, 200, 'an ALLOWED_ORIGINS page')
    t.equal((await upload(url, 'default', 'ok.txt', form('ok'))).status, 200, 'a server-side client (the Open WebUI tool) sends no Origin')
  })

  t.test('an upload invalidates the chat\'s cached prompt renders', async t => {
    const { app, url } = await server(t)
    await app.prompts.render({ chatId: 'chat-a' })
    await app.prompts.render({ chatId: 'chat-b' })
    await upload(url, 'chat-a', 'x.txt', form('x'))
    const before = app.prompts.stats().misses
    await app.prompts.render({ chatId: 'chat-a' })
    await app.prompts.render({ chatId: 'chat-b' })
    t.equal(app.prompts.stats().misses, before + 1, 'only chat-a re-rendered')
  })

  t.test('20 concurrent uploads all land intact', async t => {
    const { url } = await server(t)
    const blobs = Array.from({ length: 20 }, (_, i) => randomBytes(64 * 1024 + i))
    const results = await Promise.all(blobs.map(async (b, i) => await upload(url, 'chat-a', `batch/f${i}.bin`, form(b))))
    t.same(results.map(r => r.status), Array(20).fill(200))
    const same = await Promise.all(blobs.map(async b => await upload(url, 'chat-a', 'contended.bin', form(b))))
    t.same(same.map(r => r.status), Array(20).fill(200), 'concurrent writers of one path all succeed')
    const manifest = await (await fetch(`${url}/api/uploads/chat-a/manifest`)).json() as Record<string, string>
    blobs.forEach((b, i) => { t.equal(manifest[`batch/f${i}.bin`], md5(b)) })
    t.ok(blobs.some(b => md5(b) === manifest['contended.bin']), 'the contended path holds one complete upload')
    t.equal(Object.keys(manifest).length, 21, 'no temp files are reported')
  })
})
