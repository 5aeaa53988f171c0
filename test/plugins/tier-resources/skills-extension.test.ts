/*
 * The MCP skills extension, SEP-2640 (docs/contract.md#skills-extension), through the official SDK v2
 * client and its SkillsClient (which verifies every file against the entry) over real HTTP: the
 * capability on both protocol eras, skills/list, skills/get, resources/directory/read, per-user
 * privacy (a user skill from a fake settings service), a file changed after listing, refused skills
 * and bounded inputs. No Docker: the sandbox is a fake; the skills are a temporary SKILLS_DIR.
 */
import { createHash } from 'node:crypto'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import { SkillsClient } from '@modelcontextprotocol/client/ext/skills'
import { entry } from '../../../core/app.js'
import { entries } from '../../../fastify.config.js'
import chatStorage from '../../../plugins/chat-storage/index.js'
import promptRender from '../../../plugins/prompt-render/index.js'
import tierResources from '../../../plugins/tier-resources/index.js'
import uploads from '../../../plugins/uploads/index.js'
import userSkills from '../../../plugins/user-skills/index.js'
import { connect } from '../../fixtures/mcp-probe.js'
import { rawZip, sha256, skillMd } from '../../fixtures/raw-zip.js'
import { startSettingsService } from '../../fixtures/settings-service.js'
import { fakeSandbox, fakeTools, newSandboxLog } from '../../fixtures/tiers-app.js'
import { listen } from '../../helper.js'
import { tempDir } from '../../fixtures/temp-dir.js'

const ID = 'io.modelcontextprotocol/skills'
const ALPHA_MD = '---\nname: alpha\ndescription: |\n  Does alpha things,\n  in two lines.\nmetadata:\n  owner: tests\n---\n\n# Alpha\n'
const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0xff, 0xfe])
const notesZip = rawZip([{ name: 'SKILL.md', data: skillMd('team-notes', 'Ann\'s team note format.') }, { name: 'notes/guide.md', data: '# Guide\n' }])

async function skillsDir (t: Test): Promise<string> {
  const dir = await tempDir(t, 'skills-ext')
  const alpha = join(dir, 'public', 'alpha')
  await mkdir(join(alpha, 'references', 'deep'), { recursive: true })
  await mkdir(join(alpha, 'scripts'))
  await mkdir(join(alpha, 'assets'))
  await writeFile(join(alpha, 'SKILL.md'), ALPHA_MD)
  await writeFile(join(alpha, 'scripts', 'run.sh'), '#!/bin/sh\necho alpha\n')
  await writeFile(join(alpha, 'references', 'deep', 'notes.md'), '# Notes\n')
  await writeFile(join(alpha, 'assets', 'logo.png'), PNG)
  // The prompt accepts a trailing hyphen; the Agent Skills name rules do not.
  await mkdir(join(dir, 'public', 'bad-'))
  await writeFile(join(dir, 'public', 'bad-', 'SKILL.md'), skillMd('bad-', 'A name the extension refuses.'))
  // Over the extension's 512 files: not served through it.
  const big = join(dir, 'public', 'big')
  await mkdir(join(big, 'data'), { recursive: true })
  await writeFile(join(big, 'SKILL.md'), skillMd('big', 'Too many files.'))
  await Promise.all(Array.from({ length: 512 }, async (_, i) => { await writeFile(join(big, 'data', `${i}.txt`), 'x') }))
  return dir
}

async function v2 (t: Test, url: string, headers: Record<string, string>): Promise<{ client: Client, skills: SkillsClient }> {
  const client = new Client({ name: 'cubicle-test-v2', version: '0.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } })
  t.teardown(async () => { await client.close() })
  await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', url), { requestInit: { headers } }))
  return { client, skills: new SkillsClient(client) }
}

/** Accepts any result: raw custom requests of the v2 client need a result schema. */
const ANY = { '~standard': { version: 1 as const, vendor: 'test', validate: (value: unknown) => ({ value }) } }
const code = async (p: Promise<unknown>): Promise<unknown> => await p.then(() => 'resolved', (err: { code?: unknown }) => err.code)

t.test('the skills extension serves each user the skills they are offered, verified file by file', async t => {
  const fake = await startSettingsService(t)
  fake.users.set('ann@example.com', [{ name: 'team-notes', description: 'x', category: 'user', zip_sha256: sha256(notesZip) }])
  fake.zips.set('team-notes', notesZip)
  const dir = await skillsDir(t)
  const dataDir = await tempDir(t, 'skills-ext-data')
  const { url } = await listen(t, { DATA_DIR: dataDir }, config => [
    ...entries(config, ['mcp-transport', 'capabilities']),
    entry(fakeSandbox(newSandboxLog()), {}),
    entry(fakeTools, {}),
    entry(userSkills, { tokensUrl: fake.url, tokensApiKey: fake.apiKey, cacheDir: join(dataDir, 'skills-cache'), waitMs: 1500 }),
    entry(promptRender, { commandTimeoutSeconds: config.COMMAND_TIMEOUT, skillsDir: dir }),
    entry(chatStorage, { dataDir: config.DATA_DIR }),
    entry(uploads, { maxBytes: config.UPLOAD_MAX_BYTES }),
    entry(tierResources, { maxReadBytes: config.RESOURCE_READ_MAX_BYTES })
  ])
  const ann = await v2(t, url, { 'X-Chat-Id': 'ann-chat', 'X-User-Email': 'ann@example.com' })
  const bob = await v2(t, url, { 'X-Chat-Id': 'bob-chat', 'X-User-Email': 'bob@example.com' })

  await t.test('advertised on both eras', async t => {
    t.ok(ann.skills.supported && ann.skills.directoryRead, '2026-07-28: server/discover declares it with directoryRead')
    const legacy = await connect(t, url, { 'X-Chat-Id': 'ann-chat' })
    t.same(legacy.getServerCapabilities()?.extensions?.[ID], { directoryRead: true }, '2025-11-25: initialize declares it')
  })

  await t.test('skills/list: the servable skills by URI, private to the caller', async t => {
    await ann.client.listResources() // starts the download of Ann's ZIP skill
    let listing = await ann.skills.list()
    for (let i = 0; i < 80 && !listing.skills.some(s => s.uri.startsWith('skill://user/')); i++) {
      await new Promise(resolve => setTimeout(resolve, 100))
      listing = await ann.skills.list()
    }
    t.same(listing.skills.map(s => s.uri), ['skill://public/alpha/SKILL.md', 'skill://user/team-notes/SKILL.md'],
      'Ann: alpha and her skill; bad- (name rules) and big (513 files) are left out')
    t.same([listing.ttlMs, listing.cacheScope], [0, 'private'], 'never cached for anyone else')
    const alpha = listing.skills[0]!
    t.same(alpha.frontmatter, { name: 'alpha', description: 'Does alpha things,\nin two lines.\n', metadata: { owner: 'tests' } }, 'the front matter verbatim')
    const onDisk = await readFile(join(dir, 'public', 'alpha', 'scripts', 'run.sh'))
    t.same(alpha.resources !== 'dynamic' && alpha.resources.find(r => r.uri.endsWith('/run.sh')),
      { uri: 'skill://public/alpha/scripts/run.sh', digest: `sha256:${createHash('sha256').update(onDisk).digest('hex')}`, size: onDisk.length })
    t.same((await bob.skills.list()).skills.map(s => s.uri), ['skill://public/alpha/SKILL.md'], 'Bob does not see Ann\'s skill')
  })

  await t.test('every listed file reads back verified, text or binary', async t => {
    const { skill } = await ann.skills.get('skill://public/alpha/SKILL.md')
    const manifest = await ann.skills.read(skill)
    t.same(manifest.frontmatter, skill.frontmatter, 'SKILL.md front matter equals the entry\'s')
    t.same(Buffer.from((await ann.skills.read(skill, 'assets/logo.png')).bytes), PNG, 'a binary file comes back byte for byte')
    t.equal((await ann.skills.read(skill, 'references/deep/notes.md')).text, '# Notes\n')
    const mine = await ann.skills.get('skill://user/team-notes/SKILL.md')
    t.equal((await ann.skills.read(mine.skill, 'notes/guide.md')).text, '# Guide\n', 'a user skill\'s files too')
    t.equal(await code(bob.skills.get('skill://user/team-notes/SKILL.md')), -32602, 'Bob cannot get Ann\'s skill')
    t.equal(await code(bob.client.readResource({ uri: 'skill://user/team-notes/notes/guide.md' })), -32602, 'nor read its files')
    t.equal(await code(bob.client.request({ method: 'resources/directory/read', params: { uri: 'skill://user/team-notes' } }, ANY)), -32602, 'nor list its folder')
  })

  await t.test('resources/directory/read lists direct children, folders as inode/directory', async t => {
    const root = await ann.skills.readDirectory('skill://public/alpha')
    t.same(root.resources.map(r => [r.name, r.mimeType]), [['SKILL.md', 'text/markdown'], ['assets', 'inode/directory'], ['references', 'inode/directory'], ['scripts', 'inode/directory']])
    t.same((await ann.skills.readDirectory('skill://public/alpha/references')).resources.map(r => r.uri), ['skill://public/alpha/references/deep'])
    t.equal(await code(ann.skills.readDirectory('skill://public/alpha/scripts/run.sh')), -32602, 'a file is not a directory')
  })

  await t.test('resources/list names each skill by its SKILL.md and front matter', async t => {
    const resources = (await ann.client.listResources()).resources.filter(r => r.uri.startsWith('skill://'))
    t.same(resources.find(r => r.name === 'alpha'), {
      uri: 'skill://public/alpha/SKILL.md', name: 'alpha', title: 'Skill: alpha (public)', mimeType: 'text/markdown', description: 'Does alpha things,\nin two lines.\n', size: Buffer.byteLength(ALPHA_MD)
    })
    t.ok(resources.some(r => r.uri === 'skill://public/bad-/SKILL.md'), 'a skill the extension refuses is still a resource')
    const old = await ann.client.readResource({ uri: 'skill://public/bad-' })
    t.match(old.contents[0], { mimeType: 'text/markdown', text: /A name the extension refuses/ }, 'the older skill://<category>/<name> form reads SKILL.md')
  })

  await t.test('a file changed after listing is refused, then served with its new digest', async t => {
    const { skill } = await ann.skills.get('skill://public/alpha/SKILL.md')
    // Same size, other bytes: only the digest tells.
    await writeFile(join(dir, 'public', 'alpha', 'scripts', 'run.sh'), '#!/bin/sh\necho ALPHA\n')
    t.equal(await code(ann.skills.read(skill, 'scripts/run.sh')), -32603, 'the server does not hand out bytes its entry does not cover')
    const fresh = await ann.skills.get('skill://public/alpha/SKILL.md')
    t.equal((await ann.skills.read(fresh.skill, 'scripts/run.sh')).text, '#!/bin/sh\necho ALPHA\n')
  })

  await t.test('bad input gets -32602', async t => {
    const request = async (method: string, params: Record<string, unknown>): Promise<unknown> => await code(ann.client.request({ method, params }, ANY))
    t.equal(await request('skills/get', { uri: `skill://public/${'a'.repeat(5000)}/SKILL.md` }), -32602, 'an over-long URI')
    t.equal(await request('skills/get', {}), -32602, 'no URI')
    t.equal(await request('skills/list', { cursor: 'bm90LWEtbnVtYmVy' }), -32602, 'a cursor we did not hand out')
    t.equal(await request('skills/get', { uri: 'skill://public/alpha/../../user/team-notes/SKILL.md' }), -32602, 'dot segments are resolved first, never into another skill')
    t.equal(await request('skills/get', { uri: 'skill://Public/alpha/SKILL.md' }), -32602, 'categories are exact')
    t.equal(await code(ann.client.readResource({ uri: 'skill://public/alpha/%2e%2e/%2e%2e/user/team-notes/SKILL.md' })), -32602, 'an encoded dot segment is just an unknown file')
  })
})
