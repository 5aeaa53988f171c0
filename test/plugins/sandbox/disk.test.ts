/*
 * SANDBOX_DISK_LIMIT without an engine: the quota decision, the /tmp tmpfs, drift, the
 * host-side outputs walk and the watchdog's verdicts (on a fake SandboxEngine: logic above the adapter).
 */
import t from 'tap'
import { link, mkdir, symlink, truncate, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import pino from 'pino'
import { parseOptions } from '../../../core/config.js'
import { chatPaths } from '../../../core/chat-paths.js'
import { storageAsSeen } from '../../../core/storage-layout.js'
import { buildSandboxSpec, configDrift, tmpfsFor, type SandboxSettings } from '../../../plugins/sandbox/sandbox-spec.js'
import { dockerCreateBody, tmpfsFromOptions } from '../../../plugins/sandbox-docker/docker-create-body.js'
import { isQuotaRefusal } from '../../../plugins/sandbox/disk-quota.js'
import { quotaFor } from '../../../plugins/sandbox-docker/docker-monitor.js'
import { treeUsage } from '../../../plugins/chat-storage/usage.js'
import { createDiskWatchdog } from '../../../plugins/sandbox/disk-watchdog.js'
import type { DiskUsageReport, SandboxEngine } from '../../../plugins/sandbox/engine-types.js'
import { DockerError } from '../../../plugins/sandbox-docker/docker-error.js'
import { volumeLabels } from '../../../plugins/sandbox/names.js'
import { takeNotices } from '../../../plugins/sandbox/notices.js'
import { Chats, type Entry } from '../../../plugins/sandbox/chats.js'
import { systemClock } from '../../../plugins/sandbox/clock.js'
import { createBase, type ServiceOptions } from '../../../plugins/sandbox/context.js'
import { createTransitions } from '../../../plugins/sandbox/transitions.js'
import { SandboxOptions } from '../../../plugins/sandbox/schemas.js'
import { createChatStorage } from '../../../plugins/chat-storage/service.js'
import { tempDir } from '../../fixtures/temp-dir.js'

const MiB = 1024 * 1024
const MANAGED = new Set(['CHAT_ID'])
const GiB = 1024 * MiB

const settings: SandboxSettings = {
  image: 'img',
  prefix: 'cu',
  networkMode: 'none',
  memLimit: 2 * GiB,
  cpuLimit: 1,
  pidsLimit: 512,
  sandboxEnv: {},
  envContributors: [],
  diskLimit: 10 * GiB
}

t.test('a writable-layer quota is tried only where the storage driver can enforce one', async t => {
  t.equal(quotaFor('overlay2', 'extfs'), false, 'overlay2 on ext4: no project quota')
  t.equal(quotaFor('overlay2', 'xfs'), true, 'overlay2 on xfs: works with pquota, so try once')
  t.equal(quotaFor('btrfs', ''), true)
  t.equal(quotaFor('zfs', ''), true)
  t.equal(quotaFor('devicemapper', ''), true)
  t.equal(quotaFor('vfs', 'extfs'), false)
  t.equal(quotaFor('fuse-overlayfs', ''), false)
  t.ok(isQuotaRefusal(new DockerError("container create: --storage-opt is supported only for overlay over xfs with 'pquota' mount option", 400, false)))
  t.ok(isQuotaRefusal(new DockerError('container create: Storage Opt size is not supported', 500, false)))
  t.notOk(isQuotaRefusal(new DockerError('container create: No such image: x', 404, false)))
  t.notOk(isQuotaRefusal(new DockerError('container create: network cu-sandboxes not found', 500, false)))
})

t.test('/tmp is a tmpfs of min(limit, 1 GiB, memory / 2); none without a disk limit', async t => {
  t.same(tmpfsFor({ diskLimit: 0, memLimit: 2 * GiB }), {})
  t.same(tmpfsFor({ diskLimit: 50 * MiB, memLimit: 2 * GiB }), { '/tmp': { size: 50 * MiB, mode: 0o1777 } })
  t.same(tmpfsFor({ diskLimit: 10 * GiB, memLimit: 4 * GiB }), { '/tmp': { size: GiB, mode: 0o1777 } })
  t.same(tmpfsFor({ diskLimit: 10 * GiB, memLimit: 512 * MiB }), { '/tmp': { size: 256 * MiB, mode: 0o1777 } })
  const c = dockerCreateBody(buildSandboxSpec(settings, 'chat-1', undefined, new Date()), [])
  t.same(c.HostConfig.Tmpfs, { '/tmp': `rw,nosuid,nodev,size=${GiB},mode=1777` }, 'the engine writes the mount options: the core speaks size and mode')
  t.same(tmpfsFromOptions(c.HostConfig.Tmpfs), { '/tmp': { size: GiB, mode: 0o1777 } }, 'and reads them back for drift detection')
  t.same(tmpfsFromOptions({ '/x': 'rw,size=oops,mode=zz' }), { '/x': { size: 0, mode: 0 } }, 'an option it cannot read is 0: a drift, never a guess')
  t.equal(c.HostConfig.StorageOpt, undefined, 'no quota unless the driver takes one')
  const q = dockerCreateBody(buildSandboxSpec({ ...settings, storageQuota: true }, 'chat-1', undefined, new Date()), [])
  t.same(q.HostConfig.StorageOpt, { size: String(10 * GiB) })
  const off = dockerCreateBody(buildSandboxSpec({ ...settings, diskLimit: 0, storageQuota: true }, 'chat-1', undefined, new Date()), [])
  t.same(off.HostConfig.Tmpfs, {})
  t.equal(off.HostConfig.StorageOpt, undefined)
})

t.test('drift: a stopped container without the current tmpfs or quota is recreated', async t => {
  const desired = buildSandboxSpec({ ...settings, storageQuota: true }, 'chat-1', undefined, new Date())
  const existing = {
    imageId: 'sha256:a',
    env: desired.env,
    storage: storageAsSeen(desired.storage),
    network: 'none',
    memory: 2 * GiB,
    cpus: 1,
    pids: 512,
    tmpfs: desired.tmpfs,
    diskQuota: 10 * GiB
  }
  t.equal(configDrift(existing, desired, null, MANAGED), null)
  t.equal(configDrift({ ...existing, tmpfs: {} }, desired, null, MANAGED), 'tmpfs changed', 'created before the disk limit existed')
  t.equal(configDrift({ ...existing, tmpfs: { '/tmp': { size: 1, mode: 0o1777 } } }, desired, null, MANAGED), 'tmpfs changed')
  t.equal(configDrift({ ...existing, diskQuota: 0 }, desired, null, MANAGED), 'disk quota changed')
  t.equal(configDrift({ ...existing, diskQuota: 1 }, desired, null, MANAGED), 'disk quota changed')
})

t.test('the outputs walk counts allocated blocks, hard links once, never follows links, and is bounded', async t => {
  const root = await tempDir(t, 'disk-walk')
  const out = join(root, 'outputs')
  const elsewhere = join(root, 'elsewhere')
  await mkdir(join(out, 'a', 'b'), { recursive: true })
  await mkdir(elsewhere)
  await writeFile(join(elsewhere, 'big'), Buffer.alloc(4 * MiB, 1))
  await writeFile(join(out, 'a', 'b', 'data'), Buffer.alloc(2 * MiB, 1))
  await link(join(out, 'a', 'b', 'data'), join(out, 'hardlink'))
  await writeFile(join(out, 'sparse'), '')
  await truncate(join(out, 'sparse'), 4 * GiB)
  await symlink(elsewhere, join(out, 'to-elsewhere'))
  await symlink(join(elsewhere, 'big'), join(out, 'to-big'))
  const u = await treeUsage(out, { maxEntries: 1000 })
  t.ok(u.complete)
  t.ok(u.bytes >= 2 * MiB && u.bytes < 2.5 * MiB, `2 MiB of data counted once, sparse 4 GiB not counted, links not followed: ${u.bytes}`)
  t.equal(u.entries, 7, 'a, a/b, a/b/data, hardlink, sparse, two links')
  const capped = await treeUsage(out, { maxEntries: 2 })
  t.equal(capped.complete, false, 'past maxEntries the result is a lower bound')
  const early = await treeUsage(out, { maxEntries: 1000, stopAbove: MiB })
  t.equal(early.complete, false)
  t.ok(early.bytes > MiB, 'stops once over the bound it was asked about')
  t.same(await treeUsage(join(root, 'missing'), { maxEntries: 10 }), { bytes: 0, entries: 0, complete: true })
  const rootLink = join(root, 'link-root')
  await symlink(elsewhere, rootLink)
  t.same(await treeUsage(rootLink, { maxEntries: 10 }), { bytes: 0, entries: 0, complete: true }, 'a root swapped for a link is not followed')
})

interface FakeDocker { client: SandboxEngine, killed: string[], df: DiskUsageReport }

function fakeDocker (): FakeDocker {
  const killed: string[] = []
  const df: DiskUsageReport = { sandboxes: [], volumes: [] }
  const client = {
    diskUsage: async () => df,
    kill: async (id: string) => { killed.push(id) }
  } as unknown as SandboxEngine
  return { client, killed, df }
}

/** The disk watchdog alone over a fake engine, bootstrapped. */
function watchdog (opts: Omit<ServiceOptions, 'storage'>, engine: SandboxEngine): { pass: () => Promise<void>, entryOf: (chatId: string) => Entry } {
  const base = createBase({ ...opts, storage: createChatStorage({ dataDir: opts.dataDir }) }, engine, pino({ level: 'silent' }), systemClock)
  base.status.bootstrapped = true
  const chats = new Chats(opts.prefix)
  const disk = createDiskWatchdog(base, chats, createTransitions(base, chats, () => {}))
  return { pass: disk.pass, entryOf: chatId => chats.entryOf(chatId) }
}

t.test('watchdog: a chat over its limit is killed once, warned while over, killed again only when it grows', async t => {
  const dataDir = await tempDir(t, 'disk-wd')
  const opts = parseOptions(SandboxOptions, { prefix: 'cu', dataDir, diskLimit: 50 * MiB }, 'sandbox')
  const fake = fakeDocker()
  const reg = watchdog(opts, fake.client)
  const entry = reg.entryOf('chat-disk')
  entry.state = 'running'
  entry.sandboxId = 'cid-1'
  const outputs = chatPaths(dataDir, 'chat-disk').outputs
  await mkdir(outputs, { recursive: true })
  await writeFile(join(outputs, 'report.bin'), Buffer.alloc(5 * MiB, 1))
  const labels = volumeLabels('cu', 'chat-disk')
  const measure = (home: number, rw: number): void => {
    fake.df.volumes = [{ name: entry.names.volume, labels, size: home }, { name: 'cu-home-other', labels: { 'managed-by': 'someone-else' }, size: 999 * GiB }]
    fake.df.sandboxes = [{ id: 'cid-1', name: entry.names.container, labels, writable: rw }]
  }

  measure(30 * MiB, MiB)
  await reg.pass()
  t.same(fake.killed, [], 'under the limit (30 + 5 + 1 MiB)')
  t.same(takeNotices(entry), [])

  measure(80 * MiB, MiB)
  await reg.pass()
  t.same(fake.killed, ['cid-1'], 'over the limit: killed')
  t.equal(entry.state, 'stopped')
  t.equal(entry.recoverable, true, 'the next call starts it again')
  const [stop, ...more] = takeNotices(entry)
  t.same(more, [])
  t.match(stop, { kind: 'disk-limit', action: 'stopped', limit: 50 * MiB, usage: { home: 80 * MiB, other: MiB } })
  t.ok(stop?.kind === 'disk-limit' && stop.usage.outputs >= 5 * MiB && stop.usage.total === stop.usage.home + stop.usage.outputs + stop.usage.other)

  entry.state = 'running' // the next call started it again
  measure(81 * MiB, MiB)
  await reg.pass()
  t.same(fake.killed, ['cid-1'], 'still over but not growing: not killed again')
  t.match(takeNotices(entry), [{ kind: 'disk-limit', action: 'none' }], 'every result warns while over')
  t.match(takeNotices(entry), [{ kind: 'disk-limit', action: 'none' }])

  measure(120 * MiB, MiB)
  await reg.pass()
  t.same(fake.killed, ['cid-1', 'cid-1'], 'grew past the margin: killed again')
  t.match(takeNotices(entry), [{ kind: 'disk-limit', action: 'stopped' }])

  entry.state = 'running'
  measure(10 * MiB, 0)
  await reg.pass()
  t.equal(entry.disk.over, null, 'back under the limit')
  t.same(takeNotices(entry), [], 'no more warnings')

  entry.state = 'stopped'
  measure(500 * MiB, 0)
  await reg.pass()
  t.same(fake.killed, ['cid-1', 'cid-1'], 'a stopped chat is not measured')
})

t.test('watchdog: what the writer adds until it is killed is measured after the kill, so its restart is not stopped again', async t => {
  const dataDir = await tempDir(t, 'disk-wd')
  const opts = parseOptions(SandboxOptions, { prefix: 'cu', dataDir, diskLimit: 50 * MiB }, 'sandbox')
  const fake = fakeDocker()
  const labels = volumeLabels('cu', 'chat-dd')
  const reg = watchdog(opts, fake.client)
  const entry = reg.entryOf('chat-dd')
  entry.state = 'running'
  entry.sandboxId = 'cid-dd'
  const measure = (home: number): void => { fake.df.volumes = [{ name: entry.names.volume, labels, size: home }] }
  const kill = fake.client.kill.bind(fake.client)
  fake.client.kill = async (id: string) => { measure(80 * MiB); await kill(id) } // dd went on from 52 to 80 MiB before it died

  measure(52 * MiB)
  await reg.pass()
  t.same(fake.killed, ['cid-dd'])
  t.match(takeNotices(entry), [{ kind: 'disk-limit', action: 'stopped', usage: { home: 80 * MiB } }], 'the note gives the size after the kill')
  entry.state = 'running' // the next call started it again
  await reg.pass()
  t.same(fake.killed, ['cid-dd'], 'not killed again for what was written before the kill')
  t.match(takeNotices(entry), [{ kind: 'disk-limit', action: 'none', usage: { total: 80 * MiB } }])
})

t.test('watchdog: an engine that does not report disk usage skips the pass', async t => {
  const dataDir = await tempDir(t, 'disk-wd')
  const opts = parseOptions(SandboxOptions, { prefix: 'cu', dataDir, diskLimit: MiB }, 'sandbox')
  let killed = 0
  const client = {
    diskUsage: async () => { throw new DockerError('disk usage: a disk usage operation is already running', 409, false) },
    kill: async () => { killed++ }
  } as unknown as SandboxEngine
  const reg = watchdog(opts, client)
  const entry = reg.entryOf('chat-x')
  entry.state = 'running'
  entry.sandboxId = 'cid'
  await reg.pass()
  t.equal(killed, 0)
  t.equal(entry.disk.over, null)
})
