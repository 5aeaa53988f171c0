import t from 'tap'
import { chmod, mkdir, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { pipeline } from 'node:stream/promises'
import { Readable } from 'node:stream'
import Fastify from 'fastify'
import { chatKey } from '../../../core/chat-id.js'
import { parseRelPath } from '../../../core/safe-path.js'
import chatStoragePlugin from '../../../plugins/chat-storage/index.js'
import { createChatStorage } from '../../../plugins/chat-storage/service.js'
import { tempDir } from '../../fixtures/temp-dir.js'

// uploads and outputs are reached through the storage service, by descriptor; the sandbox is hostile.

const write = (text: string) => async (out: NodeJS.WritableStream) => { await pipeline(Readable.from([Buffer.from(text)]), out) }

t.test('prepare creates chats/<K> 0755, uploads 0755 and outputs 0750, and fixes modes that drifted', async t => {
  const root = await tempDir(t, 'chat-storage-areas')
  const storage = createChatStorage({ dataDir: root })
  await storage.prepare('p')
  const dir = join(root, 'chats', chatKey('p'))
  t.equal((await stat(join(root, 'chats'))).mode & 0o7777, 0o755)
  t.equal((await stat(dir)).mode & 0o7777, 0o755)
  t.equal((await stat(join(dir, 'uploads'))).mode & 0o7777, 0o755)
  t.equal((await stat(join(dir, 'outputs'))).mode & 0o7777, 0o750)
  await chmod(join(dir, 'outputs'), 0o777)
  await storage.prepare('p')
  t.equal((await stat(join(dir, 'outputs'))).mode & 0o7777, 0o750, 'nothing world-writable')
})

t.test('prepare refuses a symlink planted in place of outputs', async t => {
  const root = await tempDir(t, 'chat-storage-areas')
  const elsewhere = await tempDir(t, 'chat-storage-areas')
  const storage = createChatStorage({ dataDir: root })
  await mkdir(join(root, 'chats', chatKey('s'), 'uploads'), { recursive: true })
  await symlink(elsewhere, join(root, 'chats', chatKey('s'), 'outputs'))
  await t.rejects(storage.prepare('s'), { code: 'CHAT_STORAGE_NOT_DIRECTORY' })
  t.equal((await stat(elsewhere)).mode & 0o777, 0o700, 'the target keeps its mode')
})

t.test('writeAtomic stores a file below the area (parents 0755, file 0644) and leaves no temporary file', async t => {
  const root = await tempDir(t, 'chat-storage-areas')
  const storage = createChatStorage({ dataDir: root })
  const info = await storage.writeAtomic('w', 'uploads', ['docs', 'a.txt'], write('hello'))
  const file = join(root, 'chats', chatKey('w'), 'uploads', 'docs', 'a.txt')
  t.equal(await readFile(file, 'utf8'), 'hello')
  t.equal(info.size, 5)
  t.equal(info.ino, (await stat(file)).ino)
  t.equal((await stat(file)).mode & 0o777, 0o644)
  t.equal((await stat(join(root, 'chats', chatKey('w'), 'uploads', 'docs'))).mode & 0o777, 0o755)
  await t.rejects(storage.writeAtomic('w', 'uploads', ['docs'], write('x')), { code: 'CHAT_STORAGE_IS_DIRECTORY' })
  await t.rejects(storage.writeAtomic('w', 'uploads', ['docs', 'b.txt'], async () => { throw new Error('source broke') }), { message: 'source broke' })
  t.same(await readdir(join(root, 'chats', chatKey('w'), 'uploads', 'docs')), ['a.txt'], 'the failed write left nothing')
})

t.test('writeAtomic never writes through a symlinked directory of the area', async t => {
  const root = await tempDir(t, 'chat-storage-areas')
  const elsewhere = await tempDir(t, 'chat-storage-areas')
  const storage = createChatStorage({ dataDir: root })
  await storage.ensureArea('x', 'outputs')
  await symlink(elsewhere, join(root, 'chats', chatKey('x'), 'outputs', 'escape'))
  await t.rejects(storage.writeAtomic('x', 'outputs', ['escape', 'f.txt'], write('pwned')), { code: 'CORE_FORBIDDEN' })
  t.same(await readdir(elsewhere), [], 'nothing was written outside')
})

t.test('open reads a regular file of an area and refuses planted symlinks, .. and a missing area', async t => {
  const root = await tempDir(t, 'chat-storage-areas')
  const outside = await tempDir(t, 'chat-storage-areas')
  const storage = createChatStorage({ dataDir: root })
  await t.rejects(storage.open('o', 'outputs', ['a.txt']), { code: 'CORE_PATH_NOT_FOUND' }, 'no outputs yet')
  t.equal(await storage.areaRoot('o', 'outputs'), undefined)
  await storage.prepare('o')
  const outputs = join(root, 'chats', chatKey('o'), 'outputs')
  await writeFile(join(outputs, 'a.txt'), 'mine')
  await writeFile(join(outside, 'secret'), 'secret')
  await symlink(join(outside, 'secret'), join(outputs, 'link'))
  const handle = await storage.open('o', 'outputs', parseRelPath('a.txt'))
  t.equal((await handle.readFile()).toString(), 'mine')
  await handle.close()
  await t.rejects(storage.open('o', 'outputs', ['link']), { code: 'CORE_FORBIDDEN' }, 'a planted symlink is refused')
  t.throws(() => parseRelPath('../o/a.txt'), { code: 'CORE_INVALID_PATH' })
  await t.rejects(storage.open('o', 'outputs', ['..', 'uploads']), { code: 'CORE_FORBIDDEN' }, 'segments with .. never leave the area')
  await t.rejects(storage.openWalked('o', 'outputs', { absPath: join(outside, 'secret') }), { code: 'CORE_FORBIDDEN' }, 'a walked path outside the area')
  t.equal(await storage.areaRoot('o', 'outputs'), outputs)
})

t.test('areaRoot and walk ignore an outputs directory swapped for a symlink; walk skips symlinked files', async t => {
  const root = await tempDir(t, 'chat-storage-areas')
  const outside = await tempDir(t, 'chat-storage-areas')
  const storage = createChatStorage({ dataDir: root })
  await storage.prepare('v')
  const outputs = join(root, 'chats', chatKey('v'), 'outputs')
  await writeFile(join(outputs, 'real.txt'), 'r')
  await writeFile(join(outside, 'foreign.txt'), 'f')
  await symlink(join(outside, 'foreign.txt'), join(outputs, 'foreign.txt'))
  const seen: string[] = []
  for await (const e of storage.walk('v', 'outputs')) seen.push(e.relPath)
  t.same(seen, ['real.txt'])
  await rm(outputs, { recursive: true })
  await symlink(outside, outputs)
  t.equal(await storage.areaRoot('v', 'outputs'), undefined, 'a symlink in place of the area counts as missing')
  const walked = storage.walk('v', 'outputs')
  const first = await walked.next()
  t.same(first, { done: true, value: { found: false, entries: 0, exceeded: false, limited: false } }, 'walk does not enter it')
  await t.rejects(storage.open('v', 'outputs', ['foreign.txt']), { code: 'CORE_PATH_NOT_FOUND' }, 'open does not enter it')
  await t.rejects(storage.writeAtomic('v', 'outputs', ['new.txt'], write('x')), { code: 'CHAT_STORAGE_NOT_DIRECTORY' }, 'nor does a write')
  t.same((await readdir(outside)).sort(), ['foreign.txt'])
})

t.test('walk: DATA_DIR may be a symlink (resolved once); a chat directory swapped for a symlink is never entered', async t => {
  const real = await tempDir(t, 'chat-storage-areas')
  const outside = await tempDir(t, 'chat-storage-areas')
  const linked = join(outside, 'data-link')
  await symlink(real, linked)
  const storage = createChatStorage({ dataDir: linked })
  await storage.prepare('w')
  await writeFile(join(real, 'chats', chatKey('w'), 'outputs', 'a.txt'), 'a')
  const seen: string[] = []
  for await (const e of storage.walk('w', 'outputs')) seen.push(e.absPath)
  t.same(seen, [join(real, 'chats', chatKey('w'), 'outputs', 'a.txt')], 'found below DATA_DIR\'s real path')
  const elsewhere = join(outside, 'other-chat')
  await mkdir(join(elsewhere, 'outputs'), { recursive: true })
  await writeFile(join(elsewhere, 'outputs', 'foreign.txt'), 'f')
  await rm(join(real, 'chats', chatKey('w')), { recursive: true })
  await symlink(elsewhere, join(real, 'chats', chatKey('w')))
  const first = await storage.walk('w', 'outputs').next()
  t.same(first, { done: true, value: { found: false, entries: 0, exceeded: false, limited: false } }, 'the descriptor is not where it should be: missing')
})

t.test('chatKeys lists only chat keys; purge removes everything a chat stored', async t => {
  const root = await tempDir(t, 'chat-storage-areas')
  const storage = createChatStorage({ dataDir: root })
  await storage.prepare('gone')
  await storage.chatState('gone').writeJson('egress.json', {}, { maxBytes: 10 })
  await storage.prepare('kept')
  await mkdir(join(root, 'chats', 'not-a-key'))
  t.same((await storage.chatKeys()).sort(), [chatKey('gone'), chatKey('kept')].sort())
  await storage.purge('gone')
  await storage.purge('gone')
  t.same(await storage.chatKeys(), [chatKey('kept')])
  await t.rejects(storage.purgeKey('../kept'), { code: 'CHAT_STORAGE_BAD_NAME' })
  await t.rejects(storage.purgeKey('not-a-key'), { code: 'CHAT_STORAGE_BAD_NAME' })
  t.same((await readdir(join(root, 'chats'))).sort(), [chatKey('kept'), 'not-a-key'].sort())
})

t.test('the plugin decorates fastify.chatStorage and refuses an empty dataDir', async t => {
  const root = await tempDir(t, 'chat-storage-areas')
  const app = Fastify()
  t.teardown(async () => { await app.close() })
  await app.register(chatStoragePlugin, { dataDir: root })
  await app.ready()
  await app.chatStorage.prepare('deco')
  t.ok((await stat(join(root, 'chats', chatKey('deco'), 'outputs'))).isDirectory())
  const bad = Fastify()
  await t.rejects(async () => { await bad.register(chatStoragePlugin, { dataDir: '' }); await bad.ready() }, { code: 'CORE_INVALID_PLUGIN_OPTIONS' })
})
