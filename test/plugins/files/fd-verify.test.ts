/*
 * The check-then-open race of docs/contract.md#path-rules, made deterministic: the path is resolved (or the tree walked)
 * while it is a regular file, then swapped for a symlink before the open. Only the fd verification stands
 * between that swap and a foreign file.
 */
import t from 'tap'
import type { Test } from 'tap'
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Fastify from 'fastify'
import { chatPaths } from '../../../core/chat-paths.js'
import { parseOptions } from '../../../core/config.js'
import { openVerified, resolveInside } from '../../../core/safe-path.js'
import { createLinkService } from '../../../plugins/capabilities/service.js'
import { FilesOptions } from '../../../plugins/files/schemas.js'
import { createFilesService } from '../../../plugins/files/service.js'
import { createChatStorage } from '../../../plugins/chat-storage/service.js'
import { TEST_API_KEY } from '../../helper.js'

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
