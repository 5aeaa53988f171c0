/*
 * The outputs directory given to the sandbox user by the engine whose storage it is (docs/engine.md#storage):
 * the Docker engine's giveOutputs on its server-side view of DATA_DIR (core/area-owner.ts), by descriptor.
 * chat-storage only makes the directories (0750, the server's): before, it also chowned them for the core.
 */
import t from 'tap'
import { lstat, mkdir, stat, symlink } from 'node:fs/promises'
import { join } from 'node:path'
import { chatKey } from '../../../core/chat-id.js'
import { giveOutputsDir } from '../../../core/area-owner.js'
import { createChatStorage } from '../../../plugins/chat-storage/service.js'
import { createDockerEngine } from '../../../plugins/sandbox-docker/docker-client.js'
import { tempDir } from '../../fixtures/temp-dir.js'

const root = process.getuid?.() === 0
const KEY = chatKey('owner-chat')
const SLOT = 'cd'.repeat(16)

t.test('chat-storage makes outputs 0750 and leaves its owner to the engine', async t => {
  const dir = await tempDir(t, 'outputs-owner')
  await createChatStorage({ dataDir: dir }).prepare('owner-chat')
  const st = await stat(join(dir, 'chats', KEY, 'outputs'))
  t.equal(st.mode & 0o7777, 0o750)
  t.equal(st.uid, process.getuid?.(), 'still the server\'s')
})

t.test('the Docker engine gives a chat\'s and a slot\'s outputs to the sandbox user through its view of DATA_DIR', { skip: root ? false : 'needs root to chown' }, async t => {
  const dir = await tempDir(t, 'outputs-owner')
  const storage = createChatStorage({ dataDir: dir })
  await storage.prepare('owner-chat')
  await storage.prepareSlot(SLOT)
  const engine = createDockerEngine('unix:///tmp/cubicle-no-such-docker.sock', {}, undefined, { data: '/srv/elsewhere/data', skills: '', local: dir })
  t.teardown(() => { engine.close() })
  t.equal(await engine.giveOutputs?.({ chat: KEY }, { uid: 4321, gid: 4322 }), true)
  t.match(await stat(join(dir, 'chats', KEY, 'outputs')), { uid: 4321, gid: 4322 }, 'by the server-side path, not the daemon\'s')
  t.equal(await engine.giveOutputs?.({ chat: KEY }, { uid: 4321, gid: 4322 }), true, 'already given: unchanged')
  t.equal(await engine.giveOutputs?.({ slot: SLOT }, { uid: 1000, gid: 1000 }), true)
  t.match(await stat(join(dir, 'pool', SLOT, 'outputs')), { uid: 1000, gid: 1000 })
  t.equal((await stat(join(dir, 'chats', KEY, 'outputs'))).mode & 0o7777, 0o750, 'the mode stays')
  await t.rejects(async () => { await engine.giveOutputs?.({ chat: 'not-a-key' }, { uid: 1, gid: 1 }) }, TypeError, 'no path from a malformed owner')
  await t.rejects(async () => { await engine.giveOutputs?.({ chat: KEY }, { uid: -1, gid: 1 }) }, TypeError)
  const without = createDockerEngine('unix:///tmp/cubicle-no-such-docker.sock', {}, undefined, { data: dir, skills: '' })
  t.teardown(() => { without.close() })
  t.equal(await without.giveOutputs?.({ chat: KEY }, { uid: 1, gid: 1 }), false, 'without the server\'s view of DATA_DIR it cannot')
})

t.test('a symlink planted in place of outputs is never followed', { skip: root ? false : 'needs root to chown' }, async t => {
  const dir = await tempDir(t, 'outputs-owner')
  const target = await tempDir(t, 'outputs-owner')
  await mkdir(join(dir, 'chats', KEY), { recursive: true })
  await symlink(target, join(dir, 'chats', KEY, 'outputs'))
  await t.rejects(giveOutputsDir(dir, { chat: KEY }, { uid: 4321, gid: 4321 }), { code: /^(ELOOP|ENOTDIR)$/ })
  t.equal((await lstat(target)).uid, process.getuid?.(), 'the target keeps its owner')
  await t.rejects(giveOutputsDir(dir, { slot: SLOT }, { uid: 4321, gid: 4321 }), { code: 'ENOENT' }, 'a missing area is an error')
})
