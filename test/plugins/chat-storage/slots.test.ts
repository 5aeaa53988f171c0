import t from 'tap'
import { readdir, readFile, stat, symlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { chatKey } from '../../../core/chat-id.js'
import { createChatStorage } from '../../../plugins/chat-storage/service.js'
import { tempDir } from '../../fixtures/temp-dir.js'

// A warm pool slot's areas, the sandbox core's records and the outputs' size, all through chat-storage
// (docs/engine.md#storage): the core builds no path of them.

const SLOT = 'ab'.repeat(16)

t.test('prepareSlot makes pool/<slot> like a chat\'s areas; slotState keeps the journal beside them; purgeSlot removes it all', async t => {
  const root = await tempDir(t, 'chat-storage-slots')
  const storage = createChatStorage({ dataDir: root })
  t.equal(await storage.hasSlot(SLOT), false)
  await storage.prepareSlot(SLOT)
  const dir = join(root, 'pool', SLOT)
  t.equal((await stat(join(dir, 'uploads'))).mode & 0o7777, 0o755)
  t.equal((await stat(join(dir, 'outputs'))).mode & 0o7777, 0o750)
  t.equal(await storage.hasSlot(SLOT), true)
  await storage.slotState(SLOT).writeJson('claim.json', { chat_id: 'c' }, { maxBytes: 1024 })
  t.same(await storage.slotState(SLOT).readJson('claim.json', 1024), { chat_id: 'c' })
  await storage.purgeSlot(SLOT)
  await storage.purgeSlot(SLOT)
  t.equal(await storage.hasSlot(SLOT), false, 'gone, and a second purge is fine')
  for (const bad of ['../x', 'AB'.repeat(16), 'abc', `${SLOT}/..`]) {
    t.throws(() => storage.slotState(bad), { code: 'CHAT_STORAGE_BAD_NAME' }, `slot ${bad} refused`)
    await t.rejects(storage.prepareSlot(bad), { code: 'CHAT_STORAGE_BAD_NAME' })
  }
})

t.test('adoptSlot: the slot\'s areas become the chat\'s (same inodes), uploads sent before the claim kept; idempotent', async t => {
  const root = await tempDir(t, 'chat-storage-slots')
  const storage = createChatStorage({ dataDir: root })
  await storage.prepareSlot(SLOT)
  const slotOutputs = join(root, 'pool', SLOT, 'outputs')
  await writeFile(join(slotOutputs, 'made-in-sandbox.txt'), 'warm\n')
  const inode = (await stat(slotOutputs)).ino
  // The human uploaded before the chat's first tool call: the chat has areas of its own already.
  await storage.writeAtomic('chat-a', 'uploads', ['early.txt'], async out => { out.end('early\n') })
  await storage.adoptSlot(SLOT, 'chat-a')
  const chatDir = join(root, 'chats', chatKey('chat-a'))
  t.equal((await stat(join(chatDir, 'outputs'))).ino, inode, 'the mounted directory itself moved: a running sandbox keeps seeing it')
  t.equal(await readFile(join(chatDir, 'outputs', 'made-in-sandbox.txt'), 'utf8'), 'warm\n')
  t.equal(await readFile(join(chatDir, 'uploads', 'early.txt'), 'utf8'), 'early\n', 'an upload sent before the claim is kept')
  t.equal(await storage.hasSlot(SLOT), false, 'the slot is gone')
  await storage.adoptSlot(SLOT, 'chat-a')
  t.same((await readdir(join(chatDir, 'outputs'))).sort(), ['made-in-sandbox.txt'], 'a second adopt changes nothing')
})

t.test('usage: allocated bytes of an area, links never followed, 0 for a missing one; records by key', async t => {
  const root = await tempDir(t, 'chat-storage-slots')
  const storage = createChatStorage({ dataDir: root })
  t.same(await storage.usage('chat-u', 'outputs', { maxEntries: 100 }), { bytes: 0, entries: 0, complete: true })
  await storage.prepare('chat-u')
  const outputs = join(root, 'chats', chatKey('chat-u'), 'outputs')
  await writeFile(join(outputs, 'a.bin'), Buffer.alloc(64 * 1024, 1))
  await symlink('/etc', join(outputs, 'etc'))
  const u = await storage.usage('chat-u', 'outputs', { maxEntries: 100 })
  t.ok(u.bytes >= 64 * 1024 && u.bytes < 1024 * 1024, `the file counted, /etc not walked (${u.bytes} bytes)`)
  t.equal(u.entries, 2)
  t.equal(u.complete, true)
  await storage.chatState('chat-u').writeJson('sandbox.json', { chat_id: 'chat-u' }, { maxBytes: 1024, sync: false })
  t.same(await storage.chatStateOfKey(chatKey('chat-u')).readJson('sandbox.json', 1024), { chat_id: 'chat-u' }, 'the same state files by key (written without an fsync: still atomic)')
  t.throws(() => storage.chatStateOfKey('../x'), { code: 'CHAT_STORAGE_BAD_NAME' })
})
