/*
 * The hidden-path attack list (docs/contract.md#path-rules) over a real socket, so paths reach the server byte for
 * byte (no client-side normalisation of `..` or `%2e`). Every case runs against every route shape with
 * the master key AND with a files token: nothing outside the chat's outputs dir may ever come back.
 */
import t from 'tap'
import { connect } from 'node:net'
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { entry } from '../../core/app.js'
import { chatPaths } from '../../core/chat-paths.js'
import capabilities from '../../plugins/capabilities/index.js'
import files from '../../plugins/files/index.js'
import chatStorage from '../../plugins/chat-storage/index.js'
import preview from '../../plugins/preview/index.js'
import { listen, TEST_API_KEY } from '../helper.js'

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
