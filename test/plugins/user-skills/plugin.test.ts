/*
 * The user-skills plugin's wiring to the sandbox: the skills a chat's sandbox mounts are held against
 * cache eviction until the sandbox plugin reports that sandbox stopped, and closing the app stops
 * downloads in flight. A fake of our SandboxService (registered as `sandbox`) records the mount
 * provider and the stop hooks; the settings service is the loopback fake.
 */
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import Fastify from 'fastify'
import fp from 'fastify-plugin'
import t from 'tap'
import userSkills from '../../../plugins/user-skills/index.js'
import type { MountProvider, SandboxService, StopHook } from '../../../plugins/sandbox/types.js'
import { rawZip, sha256, skillMd } from '../../fixtures/raw-zip.js'
import { startSettingsService } from '../../fixtures/settings-service.js'
import { userSkill } from './setup.js'
import { tempDir } from '../../fixtures/temp-dir.js'

const zipOf = (name: string): Buffer => rawZip([{ name: 'SKILL.md', data: skillMd(name, `Skill ${name}.`) }])

t.test('a sandbox\'s skills stay until it stops; then the least recently used one makes room', async t => {
  const fake = await startSettingsService(t)
  const cacheDir = await tempDir(t, 'user-skills-plugin')
  const providers: MountProvider[] = []
  const stops: StopHook[] = []
  const sandbox = fp(async fastify => {
    fastify.decorate('sandbox', { addMounts: (p: MountProvider) => { providers.push(p) }, onStop: (h: StopHook) => { stops.push(h) } } as unknown as SandboxService)
  }, { name: 'sandbox' })
  const app = Fastify({ logger: false })
  t.teardown(async () => { await app.close() })
  // Room for one configuration file and one small skill (4 KiB each for SKILL.md and its folder).
  await app.register(sandbox).register(userSkills, { tokensUrl: fake.url, tokensApiKey: fake.apiKey, cacheDir, cacheMaxBytes: 3 * 4096, memoryTtlMs: 1, refusedRetryMs: 0 })
  await app.ready()
  t.equal(providers.length, 1, 'one mount provider registered')
  t.equal(stops.length, 1, 'one stop hook registered')
  const [alpha, bravo] = [zipOf('alpha'), zipOf('bravo')]
  fake.zips.set('alpha', alpha).set('bravo', bravo)
  const ann = 'ann@example.com'

  fake.users.set(ann, [userSkill('alpha', alpha)])
  t.match(await providers[0]!({ chatId: 'chat-1', email: ann }), [{ target: '/mnt/skills/user/alpha' }], 'chat-1\'s sandbox is created with alpha')
  fake.users.set(ann, [userSkill('bravo', bravo)])
  t.same(await app.userSkills.mounts({ email: ann }), [], 'bravo does not fit while chat-1\'s sandbox holds alpha')
  t.same(await readdir(join(cacheDir, 'skills')), [sha256(alpha)])
  stops[0]!('chat-1', 'idle')
  t.match(await providers[0]!({ chatId: 'chat-2', email: ann }), [{ target: '/mnt/skills/user/bravo' }], 'after the stop, bravo fits')
  t.same(await readdir(join(cacheDir, 'skills')), [sha256(bravo)], 'alpha was evicted')
})
