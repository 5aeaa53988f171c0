/*
 * Symlinks planted from inside a real sandbox (docs/contract.md#path-rules): the agent controls its outputs dir
 * and can point links at the host's /etc or, with a relative link that only makes sense on the host,
 * at another chat's outputs. The server follows none of them out of the chat's folder.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { entry } from '../../core/app.js'
import { chatPaths } from '../../core/chat-paths.js'
import capabilities from '../../plugins/capabilities/index.js'
import files from '../../plugins/files/index.js'
import chatStorage from '../../plugins/chat-storage/index.js'
import { build, TEST_API_KEY } from '../helper.js'
import { readZip } from '../plugins/files/zip-reader.js'
import { buildSandboxApp, cleanupPrefix, dockerOrSkip } from './docker.js'

const PREFIX = `tf-${randomBytes(3).toString('hex')}`
const KEY = TEST_API_KEY
const { skip } = await dockerOrSkip()

t.test('symlinks created inside the sandbox never lead out of its outputs (real Docker)', { skip }, async t => {
  await cleanupPrefix(t, PREFIX)
  const { app: sandboxApp, dataDir } = await buildSandboxApp(t, PREFIX)
  const sb = sandboxApp.sandbox
  await Promise.all([sb.ensure('fs-victim'), sb.ensure('fs-other')])
  const sh = async (chat: string, script: string): Promise<string> => {
    const r = await sb.exec(chat, ['bash', '-c', script], { timeoutMs: 20_000 })
    t.equal(r.exitCode, 0, `sandbox script ran: ${r.stderr.toString()}`)
    return r.stdout.toString()
  }
  const other = chatPaths(dataDir, 'fs-other')
  await sh('fs-other', 'echo OTHER-CHAT-SECRET > /mnt/user-data/outputs/secret.txt')
  await sh('fs-victim', [
    'cd /mnt/user-data/outputs',
    'echo VICTIM-OK > ok.txt',
    'ln -s /etc etc',
    'ln -s /etc/passwd passwd',
    'ln -s / root',
    `ln -s ../../${other.key}/outputs other-relative`,
    `ln -s ${other.outputs} other-absolute`,
    `ln -s ../../${other.key}/outputs/secret.txt other-file`,
    'ln -s .. parent',
    'ln -s /etc/passwd archive',
    'mkdir -p d && ln -s ../../.. d/up'
  ].join(' && '))

  const server = await build(t, { DATA_DIR: dataDir, MCP_API_KEY: KEY }, config => [
    entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: '', tokenTtlSeconds: config.LINK_TOKEN_TTL, publicBaseUrl: config.publicBaseUrl }),
    entry(chatStorage, { dataDir: config.DATA_DIR }),
    entry(files, {})
  ])
  const token = server.links.token('fs-victim', 'f') as string
  const get = async (path: string) => await server.inject({ url: `/files/fs-victim/~${token}/${path}` })
  t.equal((await get('ok.txt')).body, 'VICTIM-OK\n', 'the regular file is served')
  for (const path of ['etc/passwd', 'passwd', 'root/etc/passwd', 'other-relative/secret.txt', 'other-absolute/secret.txt', 'other-file',
    'parent/meta.json', 'archive?raw=1', 'd/up/secret.txt', `d/up/${other.key}/outputs/secret.txt`]) {
    const res = await get(path)
    t.ok(res.statusCode === 403 || res.statusCode === 404, `${path} → ${res.statusCode}`)
    t.notMatch(res.body, /root:x:0:0|OTHER-CHAT-SECRET/, `${path} leaks nothing`)
  }
  const listing = (await server.inject({ url: `/api/outputs/fs-victim?t=${token}` })).json()
  t.same(listing.files.map((f: { path: string }) => f.path), ['ok.txt'], 'the listing shows only the regular file')
  const zip = await get('archive')
  t.equal(zip.statusCode, 200)
  t.notOk(zip.rawPayload.includes('root:x:0:0'), 'the archive has no /etc/passwd')
  t.notOk(zip.rawPayload.includes('OTHER-CHAT-SECRET'), 'the archive has nothing of the other chat')
  t.same(readZip(zip.rawPayload).map(e => [e.name, e.content.toString()]), [['ok.txt', 'VICTIM-OK\n']], 'the archive has exactly the real output')
})

// a name with backslashes, written by the agent, made the archive a 500.
t.test('odd names written inside the sandbox: the archive renames them, the listing shows what downloads (real Docker)', { skip }, async t => {
  await cleanupPrefix(t, PREFIX)
  const { app: sandboxApp, dataDir } = await buildSandboxApp(t, PREFIX)
  const sb = sandboxApp.sandbox
  await sb.ensure('fs-names')
  const r = await sb.exec('fs-names', ['bash', '-c', [
    'cd /mnt/user-data/outputs',
    "printf traversal > 'a\\..\\..\\x'",
    "printf drive > 'C:evil.txt'",
    'printf real > d_x.txt',
    "printf backslash > 'd\\x.txt'",
    'printf plain > plain.txt'
  ].join(' && ')], { timeoutMs: 20_000 })
  t.equal(r.exitCode, 0, `sandbox script ran: ${r.stderr.toString()}`)
  const server = await build(t, { DATA_DIR: dataDir, MCP_API_KEY: KEY }, config => [
    entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: '', tokenTtlSeconds: config.LINK_TOKEN_TTL, publicBaseUrl: config.publicBaseUrl }),
    entry(chatStorage, { dataDir: config.DATA_DIR }),
    entry(files, {})
  ])
  const token = server.links.token('fs-names', 'f') as string
  const zip = await server.inject({ url: `/files/fs-names/~${token}/archive` })
  t.equal(zip.statusCode, 200, 'the archive is built, not a 500')
  t.same(Object.fromEntries(readZip(zip.rawPayload).map(e => [e.name, e.content.toString()])), {
    'C_evil.txt': 'drive', 'a_.._.._x': 'traversal', 'd_x (2).txt': 'backslash', 'd_x.txt': 'real', 'plain.txt': 'plain'
  })
  const listing = (await server.inject({ url: `/api/outputs/fs-names?t=${token}` })).json()
  const paths = (listing.files as Array<{ path: string, url: string }>).map(f => f.path).sort()
  t.same(paths, ['C:evil.txt', 'd_x.txt', 'plain.txt'], 'names with a backslash have no working URL and are not listed')
  for (const file of listing.files as Array<{ path: string, url: string }>) t.equal((await server.inject({ url: file.url })).statusCode, 200, `${file.path} downloads from its listed URL`)
})
