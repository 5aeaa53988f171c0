/*
 * The user skill cache on disk has a total byte cap (SKILLS_CACHE_MAX_BYTES): the least recently used
 * skill or configuration goes first, never one a sandbox or a call holds; a download that fails for
 * any reason, or does not fit, leaves the cache exactly as it was. Against a fake settings service on
 * loopback; sizes are what cache-budget.ts counts (each file and folder rounded up to 4 KiB).
 */
import { readdir, stat, utimes } from 'node:fs/promises'
import { join } from 'node:path'
import t from 'tap'
import { treeBytes } from '../../../plugins/user-skills/cache-budget.js'
import { rawZip, sha256, skillMd } from '../../fixtures/raw-zip.js'
import { offer, setup, userSkill } from './setup.js'

const BLOCK = 4096
/** A skill of one small SKILL.md: one file and its folder. */
const SKILL = 2 * BLOCK
/** One user's configuration file. */
const CONFIG = BLOCK

const zipOf = (name: string): Buffer => rawZip([{ name: 'SKILL.md', data: skillMd(name, `Skill ${name}.`) }])
const [A, B, C, D] = ['alpha', 'bravo', 'charlie', 'delta'].map(zipOf) as [Buffer, Buffer, Buffer, Buffer]

const skillsIn = async (cacheDir: string): Promise<string[]> => (await readdir(join(cacheDir, 'skills'))).sort()
const hashes = (...zips: Buffer[]): string[] => zips.map(sha256).sort()

/** Bytes the cache holds on disk, counted as the cap counts them. */
async function held (cacheDir: string): Promise<number> {
  let bytes = 0
  for (const name of await readdir(join(cacheDir, 'skills'))) bytes += await treeBytes(join(cacheDir, 'skills', name))
  bytes += (await readdir(join(cacheDir, 'configs'))).length * CONFIG
  return bytes
}

/** Every path below the cache with each file's size: "as before" means this is unchanged. */
async function listing (cacheDir: string): Promise<string[]> {
  const out: string[] = []
  for (const rel of (await readdir(cacheDir, { recursive: true })).map(String)) {
    const info = await stat(join(cacheDir, rel))
    out.push(info.isDirectory() ? `${rel}/` : `${rel} ${info.size}`)
  }
  return out.sort()
}

t.test('over the cap, the least recently used skill is evicted first', async t => {
  const { svc, fake, cacheDir, logs } = await setup(t, { cacheMaxBytes: CONFIG + 3 * SKILL, memoryTtlMs: 1 })
  const ann = 'ann@example.com'
  for (const [name, zip] of [['alpha', A], ['bravo', B], ['charlie', C]] as const) t.same(await offer(fake, svc, ann, name, zip), [`/mnt/skills/user/${name}`])
  t.same(await skillsIn(cacheDir), hashes(A, B, C), 'three skills fit exactly')
  // alpha is used again (a prompt lists it): bravo is now the least recently used.
  fake.users.set(ann, [userSkill('alpha', A)])
  t.same((await svc.forUser({ email: ann })).ready.map(s => s.name), ['alpha'])
  t.same(await offer(fake, svc, ann, 'delta', D), ['/mnt/skills/user/delta'], 'a fourth skill is admitted')
  t.same(await skillsIn(cacheDir), hashes(A, C, D), 'bravo, the least recently used, was evicted')
  t.ok(await held(cacheDir) <= CONFIG + 3 * SKILL, 'the cache stays under its cap')
  t.ok(logs.some(l => l.level === 'info' && /least recently used entries removed/.test(l.msg)), 'the eviction is logged')
  t.same(await readdir(join(cacheDir, 'tmp')), [], 'the evicted tree is gone, not parked in tmp/')
  // Enabled again, bravo is downloaded again, and charlie (now the oldest) makes room.
  const downloads = fake.hits.download
  t.same(await offer(fake, svc, ann, 'bravo', B), ['/mnt/skills/user/bravo'])
  t.equal(fake.hits.download, downloads + 1)
  t.same(await skillsIn(cacheDir), hashes(A, B, D))
})

t.test('a skill held by a sandbox is never evicted; a skill that cannot fit is refused and leaves nothing', async t => {
  const { svc, fake, cacheDir, logs } = await setup(t, { cacheMaxBytes: CONFIG + 2 * SKILL, memoryTtlMs: 1, refusedRetryMs: 0 })
  const ann = 'ann@example.com'
  fake.users.set(ann, [userSkill('alpha', A), userSkill('bravo', B)])
  fake.zips.set('alpha', A).set('bravo', B)
  t.same((await svc.mounts({ email: ann }, 'chat-1')).map(m => m.target), ['/mnt/skills/user/alpha', '/mnt/skills/user/bravo'], 'chat-1\'s sandbox mounts both')
  // The user's configuration changes (charlie replaces both); the skills and tmp/ must not.
  const skillsAndTmp = async (): Promise<string[]> => (await listing(cacheDir)).filter(p => !p.startsWith('configs/'))
  const before = await skillsAndTmp()
  t.same(await offer(fake, svc, ann, 'charlie', C), [], 'no room: charlie is not mounted')
  t.match(logs.find(l => l.level === 'warn' && /refused/.test(l.msg))?.obj, { skill: 'charlie', reason: /no room in the skill cache/ })
  t.same(await skillsAndTmp(), before, 'nothing evicted, nothing left in tmp/')
  svc.release('chat-1')
  t.same(await offer(fake, svc, ann, 'charlie', C), ['/mnt/skills/user/charlie'], 'once the sandbox stopped, charlie fits')
  t.same(await skillsIn(cacheDir), hashes(B, C), 'by evicting the least recently used one')
})

t.test('the skills of a call in flight are held: mounts() of another chat cannot evict them', async t => {
  const { svc, fake, cacheDir } = await setup(t, { cacheMaxBytes: CONFIG + 2 * SKILL, memoryTtlMs: 1, refusedRetryMs: 0 })
  fake.users.set('ann@example.com', [userSkill('alpha', A)])
  fake.users.set('bob@example.com', [userSkill('bravo', B)])
  fake.users.set('cy@example.com', [userSkill('charlie', C)])
  fake.zips.set('alpha', A).set('bravo', B).set('charlie', C)
  t.equal((await svc.mounts({ email: 'ann@example.com' }, 'chat-a')).length, 1)
  t.equal((await svc.mounts({ email: 'bob@example.com' }, 'chat-b')).length, 1)
  t.same(await svc.mounts({ email: 'cy@example.com' }, 'chat-c'), [], 'both others are held')
  t.same(await skillsIn(cacheDir), hashes(A, B))
  svc.release('chat-a')
  t.equal((await svc.mounts({ email: 'cy@example.com' }, 'chat-c')).length, 1)
  t.same(await skillsIn(cacheDir), hashes(B, C), 'only the released one was evicted')
})

t.test('configurations count against the cap: many users cannot fill the disk', async t => {
  const { svc, cacheDir } = await setup(t, { cacheMaxBytes: 5 * CONFIG })
  for (let i = 0; i < 12; i++) await svc.cached({ email: `user${i}@example.com` })
  t.equal((await readdir(join(cacheDir, 'configs'))).length, 5, 'only the five most recent configurations are kept')
  t.ok(await held(cacheDir) <= 5 * CONFIG)
})

t.test('a cache over its cap at boot (a lower cap, an older version) is cut down, oldest first', async t => {
  const first = await setup(t)
  const ann = 'ann@example.com'
  first.fake.users.set(ann, [userSkill('alpha', A), userSkill('bravo', B), userSkill('charlie', C)])
  first.fake.zips.set('alpha', A).set('bravo', B).set('charlie', C)
  t.equal((await first.svc.mounts({ email: ann })).length, 3)
  await first.svc.close()
  const age = (s: number): Date => new Date(Date.now() - s * 1000)
  await utimes(join(first.cacheDir, 'skills', sha256(A)), age(300), age(300))
  await utimes(join(first.cacheDir, 'skills', sha256(B)), age(200), age(200))
  await utimes(join(first.cacheDir, 'skills', sha256(C)), age(100), age(100))
  const again = await setup(t, { cacheDir: first.cacheDir, cacheMaxBytes: CONFIG + SKILL }, first.fake)
  t.same(await skillsIn(first.cacheDir), hashes(C), 'the two least recently used skills were removed')
  t.same((await again.svc.cached({ email: ann })).ready.map(s => s.name), ['charlie'])
  t.same(await readdir(join(first.cacheDir, 'tmp')), [])
})

// Each way a download can fail leaves the cache dir as it was before it started.
const failures: Array<[string, Parameters<typeof setup>[1], (fake: Awaited<ReturnType<typeof setup>>['fake']) => Buffer, RegExp]> = [
  ['declared larger than maxZipBytes', { maxZipBytes: 300 }, () => rawZip([{ name: 'SKILL.md', data: skillMd('big', 'x') }, { name: 'blob', data: Buffer.alloc(2000) }]), /is \d+ bytes, more than 300/],
  ['streamed past maxZipBytes without a Content-Length', { maxZipBytes: 300 }, fake => { fake.download = 'no-length'; return rawZip([{ name: 'SKILL.md', data: skillMd('big', 'x') }, { name: 'blob', data: Buffer.alloc(2000) }]) }, /larger than 300 bytes/],
  ['cut off mid-body', {}, fake => { fake.download = 'cut'; return rawZip([{ name: 'SKILL.md', data: skillMd('cut', 'x') }, { name: 'blob', data: Buffer.alloc(4000) }]) }, /download interrupted|download failed/],
  ['stalled past downloadTimeoutMs', { downloadTimeoutMs: 300, mountWaitMs: 1000 }, fake => { fake.download = 'stall'; return rawZip([{ name: 'SKILL.md', data: skillMd('slow', 'x') }, { name: 'blob', data: Buffer.alloc(4000) }]) }, /longer than 300 ms|interrupted/],
  ['not a ZIP', {}, () => Buffer.from('PK\u0003\u0004 this is not a zip at all'), /not a readable ZIP/],
  ['extracting past maxExtractBytes', { maxExtractBytes: 1000 }, () => rawZip([{ name: 'SKILL.md', data: skillMd('wide', 'x') }, { name: 'blob', data: Buffer.alloc(3000) }]), /more than 1000 bytes/],
  ['larger than the whole cache', { cacheMaxBytes: CONFIG + BLOCK }, () => rawZip([{ name: 'SKILL.md', data: skillMd('huge', 'x') }, { name: 'blob', data: Buffer.alloc(3000) }]), /no room in the skill cache/]
]

for (const [what, options, make, reason] of failures) {
  t.test(`a download ${what} leaves the cache dir as before`, async t => {
    const { svc, fake, cacheDir, logs } = await setup(t, options)
    const zip = make(fake)
    fake.users.set('ann@example.com', [userSkill('broken', zip)])
    fake.zips.set('broken', zip)
    // The configuration is cached first (cached() never downloads): it is not part of what fails.
    t.same((await svc.cached({ email: 'ann@example.com' })).pending, ['broken'])
    const before = await listing(cacheDir)
    t.same(await svc.mounts({ email: 'ann@example.com' }), [], 'not mounted')
    await svc.close()
    t.match(String(logs.find(l => l.level === 'warn' && /refused/.test(l.msg))?.obj.reason), reason)
    t.same(await listing(cacheDir), before)
  })
}

t.test('closing the service stops a download in flight and removes its file', async t => {
  const { svc, fake, cacheDir } = await setup(t, { downloadTimeoutMs: 30000 })
  const zip = rawZip([{ name: 'SKILL.md', data: skillMd('slow', 'x') }, { name: 'blob', data: Buffer.alloc(8000) }])
  fake.users.set('ann@example.com', [userSkill('slow', zip)])
  fake.zips.set('slow', zip)
  fake.download = 'stall'
  await svc.forUser({ email: 'ann@example.com' }) // starts the download, does not wait for it
  const deadline = Date.now() + 2000
  while (fake.hits.download === 0 && Date.now() < deadline) await new Promise(resolve => setTimeout(resolve, 20))
  t.equal(fake.hits.download, 1, 'the download is running')
  const started = Date.now()
  await svc.close()
  t.ok(Date.now() - started < 2000, `close() returned after ${Date.now() - started} ms, not after the 30 s download timeout`)
  t.same(await readdir(join(cacheDir, 'tmp')), [], 'no partial file left')
  t.same(await readdir(join(cacheDir, 'skills')), [])
})
