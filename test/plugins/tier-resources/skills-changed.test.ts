/*
 * notifications/resources/list_changed when a user's skill set changes (docs/contract.md#skills): a fake settings
 * service enables a user ZIP skill; when its download lands, and again when the configuration adds a
 * skill, the chats of that user that look at skill resources are told on their GET /mcp streams
 * (official MCP SDK client over real HTTP); another user's chat hears nothing.
 */
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { ResourceListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { entry } from '../../../core/app.js'
import { entries } from '../../../fastify.config.js'
import promptRender from '../../../plugins/prompt-render/index.js'
import tierResources from '../../../plugins/tier-resources/index.js'
import { createSkillWatchers } from '../../../plugins/tier-resources/skill-watchers.js'
import uploads from '../../../plugins/uploads/index.js'
import chatStorage from '../../../plugins/chat-storage/index.js'
import userSkills from '../../../plugins/user-skills/index.js'
import { connect } from '../../fixtures/mcp-probe.js'
import { rawZip, sha256, skillMd } from '../../fixtures/raw-zip.js'
import { startSettingsService } from '../../fixtures/settings-service.js'
import { listen } from '../../helper.js'
import { fakeSandbox, fakeTools, newSandboxLog } from '../../fixtures/tiers-app.js'

const notesZip = rawZip([{ name: 'SKILL.md', data: skillMd('team-notes', 'Ann\'s team note format.') }])
const secondZip = rawZip([{ name: 'SKILL.md', data: skillMd('second', 'A skill enabled later.') }])
const enabled = (name: string, zip: Buffer): Record<string, unknown> => ({ name, description: 'x', category: 'user', zip_sha256: sha256(zip) })
const sleep = async (ms: number): Promise<void> => { await new Promise(resolve => setTimeout(resolve, ms)) }

interface Listener { client: Client, heard: () => number }

async function listener (t: Parameters<typeof connect>[0], url: string, chat: string, email: string): Promise<Listener> {
  const client = await connect(t, url, { 'X-Chat-Id': chat, 'X-User-Email': email })
  let n = 0
  client.setNotificationHandler(ResourceListChangedNotificationSchema, async () => { n++ })
  return { client, heard: () => n }
}

const userSkillUris = async (c: Client): Promise<string[]> =>
  (await c.listResources()).resources.map(r => r.uri).filter(u => u.startsWith('skill://user/')).sort()

/** Polls `until` (which lists, and so drives the refresh) every 100 ms; false after the deadline. */
async function waitFor (until: () => Promise<boolean>, ms = 8000): Promise<boolean> {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (await until()) return true
    await sleep(100)
  }
  return false
}

t.test('a changed skill set reaches the user\'s chats as resources/list_changed, nobody else\'s', async t => {
  const fake = await startSettingsService(t)
  fake.users.set('ann@example.com', [enabled('team-notes', notesZip)])
  fake.zips.set('team-notes', notesZip)
  fake.zips.set('second', secondZip)
  const dataDir = await mkdtemp(join(tmpdir(), 'skills-changed-'))
  const { url } = await listen(t, { DATA_DIR: dataDir }, config => [
    ...entries(config, ['mcp-transport', 'capabilities']),
    entry(fakeSandbox(newSandboxLog()), {}),
    entry(fakeTools, {}),
    entry(userSkills, { tokensUrl: fake.url, tokensApiKey: fake.apiKey, cacheDir: join(dataDir, 'skills-cache'), memoryTtlMs: 300, waitMs: 1500 }),
    entry(promptRender, { commandTimeoutSeconds: config.COMMAND_TIMEOUT }),
    entry(chatStorage, { dataDir: config.DATA_DIR }),
    entry(uploads, { maxBytes: config.UPLOAD_MAX_BYTES }),
    entry(tierResources, { maxReadBytes: config.RESOURCE_READ_MAX_BYTES })
  ])
  const ann = await listener(t, url, 'ann-chat', 'ann@example.com')
  const annIdle = await listener(t, url, 'ann-idle', 'ann@example.com')
  const bob = await listener(t, url, 'bob-chat', 'bob@example.com')
  await sleep(300) // the SDK client opens its GET stream right after initialize

  await bob.client.listResources() // Bob's first configuration (no user skills) may be announced to Bob
  await sleep(200)
  const bobBefore = bob.heard()
  await ann.client.listResources() // starts the download of team-notes, off the request path
  // the download landing changes Ann's skill set: her chat is told, lists again and sees it
  t.ok(await waitFor(async () => (await userSkillUris(ann.client)).includes('skill://user/team-notes/SKILL.md') && ann.heard() > 0), 'Ann heard list_changed and sees her skill')
  t.equal(bob.heard(), bobBefore, 'Bob heard nothing of Ann\'s change')
  t.equal(annIdle.heard(), 0, 'a chat that never looked at resources is not told')
  t.same(await userSkillUris(bob.client), [], 'Bob does not see Ann\'s skill')

  // a configuration that enables another skill is announced too
  const before = ann.heard()
  fake.users.set('ann@example.com', [enabled('team-notes', notesZip), enabled('second', secondZip)])
  await sleep(400) // past the 300 ms memory TTL: the next request refreshes the configuration
  t.ok(await waitFor(async () => (await userSkillUris(ann.client)).includes('skill://user/second/SKILL.md') && ann.heard() > before), 'the new skill is announced and listed')
  t.same(await userSkillUris(ann.client), ['skill://user/second/SKILL.md', 'skill://user/team-notes/SKILL.md'])
  t.equal(bob.heard(), bobBefore, 'Bob still heard nothing')
})

t.test('the watcher list is bounded by count and age', async t => {
  let now = 0
  const w = createSkillWatchers({ maxChats: 3, ttlMs: 1000, now: () => now })
  w.remember('a@x', 'c1')
  w.remember('a@x', 'c2')
  w.remember('b@x', 'c3')
  t.same(w.chatsOf('a@x'), ['c1', 'c2'])
  w.remember('a@x', 'c1') // seen again: now the most recent
  w.remember('b@x', 'c4') // over the cap: the least recently seen (c2) goes
  t.same(w.chatsOf('a@x'), ['c1'])
  t.same(w.chatsOf('b@x').sort(), ['c3', 'c4'])
  t.equal(w.size(), 3)
  w.remember('b@x', 'c1') // the chat now belongs to another user
  t.same(w.chatsOf('a@x'), [])
  now = 1500
  w.remember('b@x', 'c5')
  t.same(w.chatsOf('b@x'), ['c5'], 'older than the TTL: forgotten')
  t.equal(w.size(), 1)
})
