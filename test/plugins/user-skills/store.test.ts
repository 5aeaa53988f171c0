/*
 * user-skills without Docker (docs/contract.md#skills): the settings service client, its caches and the ZIP store,
 * against a fake settings service on loopback. Every refused ZIP is checked to leave nothing behind.
 */
import { readdir, readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import t from 'tap'
import { rawZip, sha256, skillMd, type RawEntry } from '../../fixtures/raw-zip.js'
import { offer, setup, userSkill } from './setup.js'

async function leftovers (cacheDir: string): Promise<string[]> {
  return [...await readdir(join(cacheDir, 'skills')), ...await readdir(join(cacheDir, 'tmp'))]
}

t.test('a valid ZIP is downloaded, verified, extracted below one stripped folder and mounted read-only', async t => {
  const { svc, fake, cacheDir } = await setup(t)
  const zip = rawZip([
    { name: 'my-skill/' },
    { name: 'my-skill/SKILL.md', data: skillMd('my-skill', 'Makes |things| for Ann.') },
    { name: 'my-skill/scripts/run.sh', data: '#!/bin/sh\necho ok\n', mode: 0o100755 }
  ])
  t.same(await offer(fake, svc, 'ann@example.com', 'my-skill', zip), ['/mnt/skills/user/my-skill'])
  const set = await svc.forUser({ email: 'ann@example.com' })
  t.equal(set.ready.length, 1)
  const s = set.ready[0]!
  t.match(s, { name: 'my-skill', description: 'Makes |things| for Ann.', sha256: sha256(zip), hostDir: `/daemon/view/skills-cache/skills/${sha256(zip)}` })
  t.equal(await readFile(join(s.dir, 'SKILL.md'), 'utf8'), skillMd('my-skill', 'Makes |things| for Ann.'), 'top folder stripped')
  t.equal((await stat(join(s.dir, 'scripts/run.sh'))).mode & 0o777, 0o755, 'executable bit kept')
  t.equal((await stat(join(s.dir, 'scripts'))).mode & 0o777, 0o755, 'folders readable by the sandbox user')
  t.equal(fake.hits.download, 1)
  await svc.forUser({ email: 'ann@example.com' })
  t.equal(fake.hits.download, 1, 'a ready skill is never downloaded again')
  t.same(await readdir(join(cacheDir, 'tmp')), [], 'no temporary files left')
  t.same((await svc.cached({ email: 'bob@example.com' })).ready, [], 'another user does not get it')
})

// a ZIP with a bad hash, a ../ entry, an absolute path or a symlink is refused with a warning and never extracted
const hostile: Array<[string, RawEntry[], RegExp]> = [
  ['a ../ entry', [{ name: 'SKILL.md', data: skillMd('evil', 'x') }, { name: '../escape.txt', data: 'pwned' }], /unsafe or corrupt|climbs out/],
  ['a nested ../ entry', [{ name: 'SKILL.md', data: skillMd('evil', 'x') }, { name: 'a/../../escape.txt', data: 'pwned' }], /unsafe or corrupt|climbs out/],
  ['an absolute path', [{ name: 'SKILL.md', data: skillMd('evil', 'x') }, { name: '/tmp/escape.txt', data: 'pwned' }], /unsafe or corrupt|absolute/],
  ['a symlink', [{ name: 'SKILL.md', data: skillMd('evil', 'x') }, { name: 'link', data: '/etc/passwd', mode: 0o120777 }], /symbolic link/],
  ['a device', [{ name: 'SKILL.md', data: skillMd('evil', 'x') }, { name: 'dev', mode: 0o020644 }], /device, FIFO or socket/],
  ['a FIFO', [{ name: 'SKILL.md', data: skillMd('evil', 'x') }, { name: 'fifo', mode: 0o010644 }], /device, FIFO or socket/],
  ['no SKILL.md', [{ name: 'README.md', data: 'hello' }], /no SKILL\.md/],
  ['invalid front matter', [{ name: 'SKILL.md', data: '# no front matter\n' }], /front matter/],
  ['a duplicate path', [{ name: 'SKILL.md', data: skillMd('evil', 'x') }, { name: 'SKILL.md', data: skillMd('evil', 'y') }], /twice/]
]

for (const [what, entries, reason] of hostile) {
  t.test(`a ZIP with ${what} is refused with a warning and nothing is extracted`, async t => {
    const { svc, fake, cacheDir, logs } = await setup(t)
    t.same(await offer(fake, svc, 'ann@example.com', 'evil', rawZip(entries)), [], 'not mounted')
    const warn = logs.find(l => l.level === 'warn' && l.msg.includes('refused'))
    t.ok(warn, 'one warning')
    t.match(String(warn?.obj.reason), reason)
    t.same(await leftovers(cacheDir), [], 'nothing in skills/ or tmp/')
    t.same((await svc.forUser({ email: 'ann@example.com' })).pending, ['evil'], 'listed as not ready')
    t.equal(fake.hits.download, 1, 'a refused ZIP is not fetched again before the retry time')
  })
}

t.test('a ZIP whose bytes do not match zip_sha256 is refused before extraction', async t => {
  const { svc, fake, cacheDir, logs } = await setup(t)
  const zip = rawZip([{ name: 'SKILL.md', data: skillMd('tampered', 'x') }])
  t.same(await offer(fake, svc, 'ann@example.com', 'tampered', zip, 'f'.repeat(64)), [])
  t.match(String(logs.find(l => l.level === 'warn')?.obj.reason), /SHA-256 mismatch/)
  t.same(await leftovers(cacheDir), [])
})

t.test('size and entry caps refuse a ZIP; a download over the byte cap is cut off', async t => {
  const entries = await setup(t, { maxEntries: 3 })
  t.same(await offer(entries.fake, entries.svc, 'a@example.com', 'many', rawZip([{ name: 'SKILL.md', data: skillMd('many', 'x') }, ...['a', 'b', 'c'].map(n => ({ name: n, data: n }))])), [])
  t.match(String(entries.logs.find(l => l.level === 'warn')?.obj.reason), /more than 3 entries/)
  const bytes = await setup(t, { maxExtractBytes: 1000 })
  t.same(await offer(bytes.fake, bytes.svc, 'a@example.com', 'big', rawZip([{ name: 'SKILL.md', data: skillMd('big', 'x') }, { name: 'blob', data: Buffer.alloc(2000) }])), [])
  t.match(String(bytes.logs.find(l => l.level === 'warn')?.obj.reason), /more than 1000 bytes/)
  const zipCap = await setup(t, { maxZipBytes: 500 })
  t.same(await offer(zipCap.fake, zipCap.svc, 'a@example.com', 'huge', rawZip([{ name: 'SKILL.md', data: skillMd('huge', 'x') }, { name: 'blob', data: Buffer.alloc(2000) }])), [])
  t.match(String(zipCap.logs.find(l => l.level === 'warn')?.obj.reason), /more than 500/)
  t.same(await leftovers(zipCap.cacheDir), [])
})

// the service down → defaults, no stall, one warning
t.test('settings service down: defaults at once, one warning for many calls', async t => {
  const { svc, fake, logs } = await setup(t)
  fake.mode = 'down'
  const started = Date.now()
  for (let i = 0; i < 5; i++) t.match(await svc.forUser({ email: `u${i}@example.com` }), { origin: 'defaults', ready: [] })
  t.ok(Date.now() - started < 1000, 'five users answered in under a second')
  t.equal(logs.filter(l => l.level === 'warn').length, 1, 'warned once until it answers again')
})

t.test('settings service hanging: the caller waits at most waitMs', async t => {
  const { svc, fake } = await setup(t, { waitMs: 200, requestTimeoutMs: 5000 })
  fake.mode = 'hang'
  const started = Date.now()
  t.match(await svc.forUser({ email: 'ann@example.com' }), { origin: 'defaults' })
  const ms = Date.now() - started
  t.ok(ms < 1000, `answered after ${ms} ms`)
})

t.test('the last good configuration is read from disk when the service goes down', async t => {
  const first = await setup(t)
  const zip = rawZip([{ name: 'SKILL.md', data: skillMd('kept', 'Kept across restarts.') }])
  await offer(first.fake, first.svc, 'ann@example.com', 'kept', zip)
  // A restarted server: new memory, same disk; the service is down now.
  first.fake.mode = 'down'
  const again = await setup(t, { cacheDir: first.cacheDir }, first.fake)
  const set = await again.svc.forUser({ email: 'ann@example.com' })
  t.equal(set.origin, 'disk')
  t.same(set.ready.map(s => s.name), ['kept'], 'the cached skill still mounts')
})

t.test('cached() never downloads; the wrong key is refused by the service and degrades', async t => {
  const { svc, fake } = await setup(t)
  const zip = rawZip([{ name: 'SKILL.md', data: skillMd('lazy', 'x') }])
  fake.users.set('ann@example.com', [userSkill('lazy', zip)])
  fake.zips.set('lazy', zip)
  t.same((await svc.cached({ email: 'ann@example.com' })).pending, ['lazy'])
  t.equal(fake.hits.download, 0)
  const wrong = await svc.forUser({ email: 'bob@example.com', credentials: { mcpTokensUrl: fake.url, mcpTokensApiKey: 'wrong-key', mcpTokensCaller: 'key' } })
  t.equal(wrong.origin, 'defaults')
  t.equal(fake.hits.badKey, 1, 'the header pair replaced the configured key')
})
