/*
 * Per-user skills on real Docker (docs/contract.md#skills): a fake settings service on loopback enables a user ZIP
 * skill for Ann; it reaches her prompt, /skill-list, /skill-mounts and her sandbox (read-only at
 * /mnt/skills/user/<name>), never Bob's; a changed set reaches a stopped sandbox at its next start
 * with the workspace kept; a hanging service costs a bounded wait and gives the defaults.
 */
import { randomBytes } from 'node:crypto'
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { entry } from '../../core/app.js'
import { entries } from '../../fastify.config.js'
import userSkills from '../../plugins/user-skills/index.js'
import { connect, textOf } from '../fixtures/mcp-probe.js'
import { rawZip, sha256, skillMd } from '../fixtures/raw-zip.js'
import { startSettingsService } from '../fixtures/settings-service.js'
import { listen, TEST_API_KEY } from '../helper.js'
import { cleanupPrefix, dockerOrSkip, TEST_IMAGE } from './docker.js'

const gate = await dockerOrSkip()
const prefix = `t-${randomBytes(3).toString('hex')}`
const auth = { Authorization: `Bearer ${TEST_API_KEY}` }

const notesZip = rawZip([
  { name: 'team-notes/' },
  { name: 'team-notes/SKILL.md', data: skillMd('team-notes', 'Ann\'s team note format (user skill).') },
  { name: 'team-notes/scripts/hello.sh', data: '#!/bin/sh\necho "hello from team-notes"\n', mode: 0o100755 }
])
const secondZip = rawZip([{ name: 'SKILL.md', data: skillMd('second', 'A skill enabled later.') }])
const enabled = (name: string, zip: Buffer): Record<string, unknown> => ({ name, description: 'x', category: 'user', zip_sha256: sha256(zip) })

async function sh (c: Client, command: string): Promise<string> {
  return textOf(await c.callTool({ name: 'bash_tool', arguments: { command, description: 'user-skills test' } }, undefined, { timeout: 120_000 }))
}

t.test('per-user skills on real Docker', gate, async t => {
  await cleanupPrefix(t, prefix)
  const fake = await startSettingsService(t)
  fake.users.set('ann@example.com', [enabled('team-notes', notesZip)])
  fake.zips.set('team-notes', notesZip)
  fake.zips.set('second', secondZip)
  const dataDir = await mkdtemp(join(tmpdir(), `${prefix}-data-`))
  const { app, url } = await listen(t, { MCP_API_KEY: TEST_API_KEY, DATA_DIR: dataDir, SANDBOX_PREFIX: prefix, DOCKER_IMAGE: TEST_IMAGE, CONTAINER_MEM_LIMIT: '512m' }, config => [
    ...entries(config, ['chat-storage', 'mcp-transport', 'capabilities', 'sandbox-docker', 'sandbox', 'workspace-tools']),
    // A short memory TTL so the test sees a changed configuration without waiting 60 s.
    entry(userSkills, { tokensUrl: fake.url, tokensApiKey: fake.apiKey, cacheDir: config.skillsCacheDir, cacheHostDir: config.skillsCacheHostDir, memoryTtlMs: 300, waitMs: 1500 }),
    ...entries(config, ['prompt-render', 'uploads', 'tier-dynamic-instructions', 'tier-resources', 'tier-http'])
  ])
  const get = async (path: string): Promise<{ status: number, text: string }> => {
    const res = await fetch(`${url}${path}`, { headers: auth })
    return { status: res.status, text: await res.text() }
  }
  const chatA = `skills-a-${randomBytes(3).toString('hex')}`
  const chatB = `skills-b-${randomBytes(3).toString('hex')}`
  const notesDir = join(dataDir, 'skills-cache', 'skills', sha256(notesZip))

  // /skill-mounts reports cached skills only and never downloads
  t.test('/skill-mounts before any download: {} and no download started', async t => {
    const r = await get('/skill-mounts?user_email=ann@example.com')
    t.equal(r.status, 200)
    t.same(JSON.parse(r.text), {})
    t.equal(fake.hits.download, 0)
    t.equal((await fetch(`${url}/skill-mounts?user_email=ann@example.com`)).status, 401, 'bearer required')
  })

  // the user's skill appears inside that user's sandbox, read-only
  t.test('Ann\'s sandbox has her skill read-only at /mnt/skills/user/team-notes', async t => {
    const ann = await connect(t, url, { ...auth, 'X-Chat-Id': chatA, 'X-User-Email': 'ann@example.com' })
    t.equal(await sh(ann, 'cat /mnt/skills/user/team-notes/SKILL.md'), skillMd('team-notes', 'Ann\'s team note format (user skill).'))
    t.equal(await sh(ann, '/mnt/skills/user/team-notes/scripts/hello.sh'), 'hello from team-notes\n', 'its script runs')
    t.match(await sh(ann, 'touch /mnt/skills/user/team-notes/x 2>&1; echo rc=$?'), /Read-only file system[\s\S]*rc=1/)
    t.match(await sh(ann, 'mkdir /mnt/skills/user/mine 2>&1; echo rc=$?'), /rc=1/, 'assistant cannot add skills')
    t.ok(await sh(ann, 'ls /mnt/skills/public'), 'the built-ins are still there')
    t.equal(fake.hits.download, 1)
  })

  // the user's skill appears in the prompt (first), /skill-list and /skill-mounts
  t.test('prompt, /skill-list and /skill-mounts list Ann\'s skill first', async t => {
    const list = await get('/skill-list?user_email=ann@example.com')
    t.equal(list.text.split('\n')[0], '- team-notes: /mnt/skills/user/team-notes/SKILL.md - Ann\'s team note format (user skill).')
    const prompt = await get('/system-prompt?user_email=ann@example.com')
    const block = prompt.text.slice(prompt.text.indexOf('<available_skills>'))
    t.match(block, /^<available_skills>\n<skill>\n<name>\nteam-notes\n<\/name>\n<description>\nAnn&apos;s team note format \(user skill\)\.\n<\/description>\n<location>\n\/mnt\/skills\/user\/team-notes\/SKILL\.md\n<\/location>/)
    const ann = await connect(t, url, { ...auth, 'X-Chat-Id': chatA, 'X-User-Email': 'ann@example.com' })
    t.match(ann.getInstructions(), '/mnt/skills/user/team-notes/SKILL.md', 'MCP instructions (tier 4) too')
    const mounts = JSON.parse((await get('/skill-mounts?user_email=ann@example.com')).text) as Record<string, unknown>
    t.same(mounts, { [notesDir]: { bind: '/mnt/skills/user/team-notes', mode: 'ro' } })
  })

  // skills as MCP resources, per chat and per user
  t.test('skill resources: Ann lists and reads hers next to the built-ins; Bob cannot read it', async t => {
    const ann = await connect(t, url, { ...auth, 'X-Chat-Id': chatA, 'X-User-Email': 'ann@example.com' })
    const { resources } = await ann.listResources()
    const skills = resources.filter(r => r.uri.startsWith('skill://'))
    t.equal(skills[0]?.uri, 'skill://user/team-notes/SKILL.md', 'user skills first')
    t.match(skills[0], { name: 'team-notes', title: 'Skill: team-notes (user)', mimeType: 'text/markdown', description: 'Ann\'s team note format (user skill).' })
    t.ok(skills.some(r => r.uri.startsWith('skill://public/')), 'the built-in public skills too')
    const read = await ann.readResource({ uri: 'skill://user/team-notes' })
    t.same(read.contents, [{ uri: 'skill://user/team-notes', mimeType: 'text/markdown', text: skillMd('team-notes', 'Ann\'s team note format (user skill).') }])
    const pub = skills.find(r => r.uri.startsWith('skill://public/'))!
    t.match((await ann.readResource({ uri: pub.uri })).contents[0], { text: /^---\n[\s\S]*name: / }, 'a built-in SKILL.md reads too')
    const bob = await connect(t, url, { ...auth, 'X-Chat-Id': chatB, 'X-User-Email': 'bob@example.com' })
    t.notOk((await bob.listResources()).resources.some(r => r.uri.startsWith('skill://user/team-notes')), 'not in Bob\'s list')
    for (const uri of ['skill://user/team-notes', 'skill://user/team-notes/SKILL.md', 'skill://user/../public/x', 'skill://user/Team-Notes', 'skill://secret/team-notes']) {
      const err = await bob.readResource({ uri }).then(() => undefined, (e: unknown) => e as { code: number })
      t.equal(err?.code, -32602, `${uri} is not found for Bob`)
    }
  })

  // another user's sandbox never sees them
  t.test('Bob sees none of it', async t => {
    const bob = await connect(t, url, { ...auth, 'X-Chat-Id': chatB, 'X-User-Email': 'bob@example.com' })
    t.equal(await sh(bob, 'ls /mnt/skills/user 2>&1; echo rc=$?'), 'ls: cannot access \'/mnt/skills/user\': No such file or directory\nrc=2\n')
    t.notMatch((await get('/skill-list?user_email=bob@example.com')).text, 'team-notes')
    t.notMatch((await get('/system-prompt?user_email=bob@example.com')).text, 'team-notes')
    t.notMatch(bob.getInstructions(), 'team-notes')
    t.same(JSON.parse((await get('/skill-mounts?user_email=bob@example.com')).text), {})
    t.same(JSON.parse((await get('/skill-mounts')).text), {}, '{} without an email')
  })

  // a changed skill set reaches the sandbox on its next start without losing the workspace
  t.test('a newly enabled skill reaches Ann\'s sandbox at its next start; the workspace is kept', async t => {
    const ann = await connect(t, url, { ...auth, 'X-Chat-Id': chatA, 'X-User-Email': 'ann@example.com' })
    await sh(ann, 'echo kept > /home/assistant/work.txt')
    fake.users.set('ann@example.com', [enabled('team-notes', notesZip), enabled('second', secondZip)])
    await new Promise(resolve => setTimeout(resolve, 400))
    t.equal(await sh(ann, 'ls /mnt/skills/user'), 'team-notes\n', 'a running sandbox keeps its mounts')
    await app.sandbox.stop(chatA)
    t.equal(await sh(ann, 'ls /mnt/skills/user'), 'second\nteam-notes\n', 'recreated with both skills')
    t.equal(await sh(ann, 'cat /home/assistant/work.txt'), 'kept\n', 'the workspace volume survived')
    t.equal(await sh(ann, 'cat /mnt/skills/user/second/SKILL.md'), skillMd('second', 'A skill enabled later.'), 'a ZIP without a top folder')
  })

  // the service down -> defaults, no stall
  t.test('a hanging settings service: the prompt and a new sandbox answer within the wait bound, with the defaults', async t => {
    fake.mode = 'hang'
    const started = Date.now()
    const list = await get('/skill-list?user_email=carol@example.com')
    t.ok(Date.now() - started < 4000, `/skill-list answered after ${Date.now() - started} ms`)
    t.match(list.text, /^- \S+: \/mnt\/skills\/public\//, 'the default public skills')
    const carol = await connect(t, url, { ...auth, 'X-Chat-Id': `skills-c-${randomBytes(3).toString('hex')}`, 'X-User-Email': 'carol@example.com' })
    t.equal(await sh(carol, 'echo up'), 'up\n', 'the tool call is not blocked')
    fake.mode = 'ok'
  })
})
