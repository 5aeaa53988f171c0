import t from 'tap'
import { lstat, mkdir, readFile, readdir, rm, stat, symlink, writeFile } from 'node:fs/promises'
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { chatKey } from '../../../core/chat-id.js'
import { createChatStorage } from '../../../plugins/chat-storage/service.js'
import { tempDir } from '../../fixtures/temp-dir.js'

// chat storage is an explicit service; its state files are read by descriptor, bounded and atomic.

t.test('a chat state file is written atomically below chats/<K> (the key, never the raw id), 0644, and read back', async t => {
  const root = await tempDir(t, 'chat-storage-state')
  const storage = createChatStorage({ dataDir: root })
  const state = storage.chatState('my-chat')
  await state.writeJson('egress.json', { chatId: 'my-chat', mode: 'off' }, { maxBytes: 1024 })
  const K = chatKey('my-chat')
  t.equal(storage.key('my-chat'), K)
  t.same(await readdir(join(root, 'chats')), [K], 'only the hash-derived key appears in paths')
  t.same(await readdir(join(root, 'chats', K)), ['egress.json'], 'no temporary file left')
  t.equal(await readFile(join(root, 'chats', K, 'egress.json'), 'utf8'), '{\n  "chatId": "my-chat",\n  "mode": "off"\n}\n')
  t.equal((await stat(join(root, 'chats', K, 'egress.json'))).mode & 0o777, 0o644)
  t.equal((await stat(join(root, 'chats', K))).mode & 0o777, 0o755)
  t.same(await state.readJson('egress.json', 1024), { chatId: 'my-chat', mode: 'off' })
  t.equal(await state.read('meta.json', 1024), null, 'absent → null')
  await state.remove('egress.json')
  await state.remove('egress.json') // absent is fine
  t.equal(await state.read('egress.json', 1024), null)
})

t.test('oversized JSON is refused before anything is written, and an oversized file is not read', async t => {
  const root = await tempDir(t, 'chat-storage-state')
  const state = createChatStorage({ dataDir: root }).chatState('big')
  await state.writeJson('egress.json', { ok: true }, { maxBytes: 100 })
  await t.rejects(state.writeJson('egress.json', { allow: 'x'.repeat(200) }, { maxBytes: 100 }), { code: 'CHAT_STORAGE_TOO_LARGE', statusCode: 413 })
  t.same(await state.readJson('egress.json', 100), { ok: true }, 'the previous content is intact')
  await writeFile(join(root, 'chats', chatKey('big'), 'meta.json'), 'y'.repeat(5000))
  await t.rejects(state.read('meta.json', 4999), { code: 'CHAT_STORAGE_TOO_LARGE' })
  t.equal((await state.read('meta.json', 5000))?.length, 5000, 'exactly the bound is allowed')
})

t.test('a symlink planted where a state file is expected is refused, never followed; a write replaces the link itself', async t => {
  const root = await tempDir(t, 'chat-storage-state')
  const outside = await tempDir(t, 'chat-storage-state')
  const storage = createChatStorage({ dataDir: root })
  const state = storage.chatState('victim')
  await state.ensure()
  const secret = join(outside, 'secret.json')
  await writeFile(secret, '{"secret":true}\n')
  const planted = join(root, 'chats', chatKey('victim'), 'meta.json')
  await symlink(secret, planted)
  await t.rejects(state.read('meta.json', 1024), { code: 'CHAT_STORAGE_NOT_REGULAR' })
  await state.writeJson('meta.json', { chat_id: 'victim' }, { maxBytes: 1024 })
  t.equal(await readFile(secret, 'utf8'), '{"secret":true}\n', 'the link target is untouched')
  t.notOk((await lstat(planted)).isSymbolicLink(), 'the link was replaced by a regular file')
  t.same(await state.readJson('meta.json', 1024), { chat_id: 'victim' })
})

t.test('a directory, a fifo or a symlinked chat directory in place of a state file is refused', async t => {
  const root = await tempDir(t, 'chat-storage-state')
  const storage = createChatStorage({ dataDir: root })
  const K = chatKey('odd')
  await mkdir(join(root, 'chats', K, 'egress.json'), { recursive: true })
  await t.rejects(storage.chatState('odd').read('egress.json', 1024), { code: 'CHAT_STORAGE_NOT_REGULAR' })
  execFileSync('mkfifo', [join(root, 'chats', K, 'meta.json')])
  await t.rejects(storage.chatState('odd').read('meta.json', 1024), { code: 'CHAT_STORAGE_NOT_REGULAR' }, 'a fifo neither hangs nor is read')

  // chats/<K> of another chat replaced by a symlink to a directory holding a look-alike file
  const elsewhere = await tempDir(t, 'chat-storage-state')
  await writeFile(join(elsewhere, 'meta.json'), '{"chat_id":"swapped"}')
  await mkdir(join(root, 'chats'), { recursive: true })
  await symlink(elsewhere, join(root, 'chats', chatKey('swapped')))
  await t.rejects(storage.chatState('swapped').read('meta.json', 1024), { code: 'CHAT_STORAGE_NOT_REGULAR' }, 'a symlinked directory on the way is refused')
  await t.rejects(storage.chatState('swapped').writeJson('meta.json', {}, { maxBytes: 100 }), { code: 'CHAT_STORAGE_NOT_DIRECTORY' }, 'and never written through')
  t.equal(await readFile(join(elsewhere, 'meta.json'), 'utf8'), '{"chat_id":"swapped"}')
})

t.test('names with .., slashes or odd characters are refused as programming errors', async t => {
  const root = await tempDir(t, 'chat-storage-state')
  const storage = createChatStorage({ dataDir: root })
  const state = storage.chatState('names')
  for (const bad of ['../meta.json', '..', 'a/b.json', '.hidden', 'x..json', '', 'a\0b', 'é.json']) {
    await t.rejects(state.read(bad, 10), { code: 'CHAT_STORAGE_BAD_NAME' }, `read ${JSON.stringify(bad)}`)
    await t.rejects(state.write(bad, '{}', { maxBytes: 10 }), { code: 'CHAT_STORAGE_BAD_NAME' }, `write ${JSON.stringify(bad)}`)
  }
  await t.rejects(state.quarantine('meta.json', '../x'), { code: 'CHAT_STORAGE_BAD_NAME' })
  for (const scope of ['chats', 'chats/x', '../oauth', 'oauth/../x', 'OAuth', '/oauth', 'oauth/']) {
    t.throws(() => storage.serverState(scope), { code: 'CHAT_STORAGE_BAD_NAME' }, `scope ${JSON.stringify(scope)}`)
  }
  t.same(await readdir(root), [], 'nothing was created')
})

t.test('server state lives in its own 0700 directory below DATA_DIR; a bad file is set aside, not overwritten', async t => {
  const root = await tempDir(t, 'chat-storage-state')
  const storage = createChatStorage({ dataDir: root })
  const state = storage.serverState('oauth/state')
  await state.ensure()
  t.equal((await stat(join(root, 'oauth'))).mode & 0o777, 0o700)
  t.equal((await stat(join(root, 'oauth', 'state'))).mode & 0o777, 0o700)
  await state.write('Grant.json', '{"version":1}', { maxBytes: 100, mode: 0o600 })
  t.equal((await stat(join(root, 'oauth', 'state', 'Grant.json'))).mode & 0o777, 0o600)
  await state.quarantine('Grant.json', '1700000000000')
  t.same((await readdir(join(root, 'oauth', 'state'))).sort(), ['Grant.json.corrupt-1700000000000'])
  t.equal(await state.read('Grant.json', 100), null)
})

t.test('list names the regular files only: symlinks, directories and fifos are left out, never followed', async t => {
  const root = await tempDir(t, 'chat-storage-state')
  const state = createChatStorage({ dataDir: root }).serverState('oauth/clients')
  t.same(await state.list(10), [], 'no directory yet → nothing')
  await state.write('a.json', '{}', { maxBytes: 10 })
  await state.write('b.json', '{}', { maxBytes: 10 })
  const dir = join(root, 'oauth', 'clients')
  await symlink('/etc', join(dir, 'link.json'))
  await mkdir(join(dir, 'sub.json'))
  execFileSync('mkfifo', [join(dir, 'fifo.json')])
  t.same((await state.list(10)).sort(), ['a.json', 'b.json'])
  t.equal((await state.list(1)).length, 1, 'at most limit')
  await rm(dir, { recursive: true })
  await mkdir(join(root, 'elsewhere'))
  await writeFile(join(root, 'elsewhere', 'x.json'), '{}')
  await symlink(join(root, 'elsewhere'), dir)
  await t.rejects(state.list(10), { code: 'CHAT_STORAGE_NOT_DIRECTORY' }, 'a symlinked directory is refused')
})

t.test('the chat\'s meta record: written and read through chat-storage only; unreadable records count as none', async t => {
  const root = await tempDir(t, 'chat-storage-state')
  const storage = createChatStorage({ dataDir: root })
  const K = chatKey('meta-chat')
  t.equal(await storage.readMeta('meta-chat'), null, 'none yet')
  const meta = { chat_id: 'meta-chat', user_email: 'a@example.com', user_name: null, mcp_servers: ['x'], created_at: '2026-01-01T00:00:00.000Z', last_active_at: '2026-01-02T00:00:00.000Z', image: 'img' }
  await storage.writeMeta('meta-chat', meta)
  t.same(await storage.readMeta('meta-chat'), meta)
  t.same(await storage.readMetaOfKey(K), meta, 'by key, as the purge pass reads it')
  t.equal((await stat(join(root, 'chats', K, 'meta.json'))).mode & 0o777, 0o644)
  t.same(await readdir(join(root, 'chats', K)), ['meta.json'], 'no temporary file left')
  const path = join(root, 'chats', K, 'meta.json')
  await writeFile(path, '{"chat_id": 5}')
  t.equal(await storage.readMeta('meta-chat'), null, 'wrong shape')
  await writeFile(path, 'not json')
  t.equal(await storage.readMeta('meta-chat'), null, 'not JSON')
  await writeFile(path, JSON.stringify({ ...meta, image: 'x'.repeat(70 * 1024) }))
  t.equal(await storage.readMeta('meta-chat'), null, 'over 64 KiB: not read')
  await rm(path)
  await writeFile(join(root, 'elsewhere.json'), JSON.stringify(meta))
  await symlink(join(root, 'elsewhere.json'), path)
  t.equal(await storage.readMeta('meta-chat'), null, 'a symlink is never followed')
  await t.rejects(storage.readMetaOfKey('../x'), { code: 'CHAT_STORAGE_BAD_NAME' })
})
