/*
 * One server instance per SANDBOX_PREFIX on a Docker engine: the first takes an exclusive lease on
 * its prefix, a second one with the same prefix refuses to start and names the holder, a clean
 * shutdown releases the lease, and a lease whose holder stopped renewing it (or whose process is gone
 * on this host) is taken over. Real Docker.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { mkdtemp } from 'node:fs/promises'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildSandboxApp, cleanupPrefix, DOCKER_HOST, dockerOrSkip, TEST_IMAGE, testDockerClient, wrapClient } from './docker.js'
import { pollUntil } from '../fixtures/poll.js'
import { leaseName } from '../../plugins/sandbox/prefix-lease.js'

const { skip } = await dockerOrSkip()
const labelsOf = (prefix: string): Record<string, string> => ({ 'managed-by': 'computer-use-server', 'cu.prefix': prefix, 'cu.role': 'lease' })
const sleep = async (ms: number): Promise<void> => await new Promise(resolve => setTimeout(resolve, ms))

async function dataDir (prefix: string): Promise<string> {
  return await mkdtemp(join(tmpdir(), `${prefix}-data-`))
}

/** The lease's record as another instance would find it (the engine answers the current holder). */
async function currentLease (prefix: string): Promise<{ holder: { id: string, host: string, pid: number }, renewedAt: number, token: string } | null> {
  const engine = testDockerClient()
  try {
    const r = await engine.acquireLease(leaseName(prefix), { id: 'probe', host: 'probe', pid: 1, startedAt: '' }, { labels: labelsOf(prefix), image: TEST_IMAGE, now: Date.now() })
    if (r.acquired) { await engine.breakLease(r.token); return null }
    return r.current
  } finally { engine.close() }
}

/** A lease planted by an instance that is not this test's server. */
async function plant (prefix: string, holder: { id: string, host: string, pid: number, startedAt: string }, renewedAt: number): Promise<string> {
  const engine = testDockerClient()
  try {
    const r = await engine.acquireLease(leaseName(prefix), holder, { labels: labelsOf(prefix), image: TEST_IMAGE, now: renewedAt })
    if (!r.acquired) throw new Error('the prefix was already leased')
    return r.token
  } finally { engine.close() }
}

t.test('a second instance with the same prefix refuses to start, naming the prefix and the holder', { skip }, async t => {
  const prefix = 'tlease'
  await cleanupPrefix(t, prefix)
  const first = await buildSandboxApp(t, prefix, {}, await dataDir(prefix))
  await first.service.ensure('lease-chat')
  const ran = await first.service.exec('lease-chat', ['echo', 'first'])
  t.equal(ran.stdout.toString(), 'first\n')
  const network = first.service.network()
  await t.rejects(buildSandboxApp(t, prefix, {}, await dataDir(prefix)), {
    name: 'SandboxSetupRefused',
    message: new RegExp(`^SANDBOX_PREFIX '${prefix}' is in use by another server instance on this Docker engine \\(host ${hostname().replace(/[.]/g, '\\.')}, pid ${process.pid}, started \\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ, last renewal \\d+ s ago\\)\\. .*give this instance its own SANDBOX_PREFIX, or stop the other one`)
  })
  t.same(first.service.network(), network, 'the first keeps its network')
  const docker = testDockerClient()
  t.teardown(() => { docker.close() })
  const owned = await docker.list(['managed-by=computer-use-server', `cu.prefix=${prefix}`])
  t.ok(owned.some(c => c.name === `${prefix}-lease` && !c.running), 'the lease is a never-started container with the owner labels (an uninstall by label finds it)')
  t.equal((await first.service.exec('lease-chat', ['echo', 'still'])).stdout.toString(), 'still\n', 'the first keeps its sandboxes')
  t.equal((await first.service.status('lease-chat')).state, 'running')

  t.test('the real server (core/server.ts) with the same prefix exits with a FATAL line naming the prefix and the holder', async t => {
    const root = fileURLToPath(new URL('../..', import.meta.url))
    const child = spawn(process.execPath, ['--import=tsx', 'core/server.ts'], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', DATA_DIR: await dataDir(prefix), DOCKER_HOST, DOCKER_IMAGE: TEST_IMAGE, SANDBOX_PREFIX: prefix, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'error' }
    })
    let stderr = ''
    child.stderr.on('data', c => { stderr += String(c) })
    child.stdout.resume()
    const timer = setTimeout(() => child.kill('SIGTERM'), 60_000)
    const code = await new Promise(resolve => child.on('close', resolve))
    clearTimeout(timer)
    t.equal(code, 1)
    t.match(stderr, new RegExp(`FATAL: could not start: SANDBOX_PREFIX '${prefix}' is in use by another server instance on this Docker engine \\(host [^,]+, pid ${process.pid}, started `))
  })

  t.test('after the first stops cleanly, a new instance starts and re-adopts the sandbox', async t => {
    await first.app.close()
    t.equal(await currentLease(prefix), null, 'the lease was released')
    const next = await buildSandboxApp(t, prefix, {}, first.dataDir)
    t.equal((await next.service.status('lease-chat')).state, 'running')
    t.equal((await currentLease(prefix))?.holder.pid, process.pid, 'the new instance holds the lease')
  })
})

t.test('a stale lease (not renewed for longer than the timeout, holder elsewhere) is taken over', { skip }, async t => {
  const prefix = 'tleasestale'
  await cleanupPrefix(t, prefix)
  await plant(prefix, { id: 'gone', host: 'elsewhere.invalid', pid: 4242, startedAt: '2026-01-01T00:00:00Z' }, Date.now() - 120_000)
  const s = await buildSandboxApp(t, prefix, { leaseTimeoutS: 60 }, await dataDir(prefix))
  t.ok(s.service.network(), 'the instance started')
  const now = await currentLease(prefix)
  t.equal(now?.holder.host, hostname())
  t.not(now?.holder.id, 'gone')
})

t.test('a lease that missed two renewals (its holder killed without a clean shutdown) is waited for, then taken over', { skip }, async t => {
  const prefix = 'tleasewait'
  await cleanupPrefix(t, prefix)
  await plant(prefix, { id: 'killed', host: 'elsewhere.invalid', pid: 4242, startedAt: '2026-01-01T00:00:00Z' }, Date.now() - 4500)
  const started = Date.now()
  const s = await buildSandboxApp(t, prefix, { leaseTimeoutS: 6 }, await dataDir(prefix))
  t.ok(s.service.network(), 'the instance started instead of refusing')
  t.ok(Date.now() - started >= 1000, `it waited until the lease was stale (${Date.now() - started} ms)`)
  const now = await currentLease(prefix)
  t.equal(now?.holder.host, hostname())
  t.not(now?.holder.id, 'killed')
})

t.test('a fresh lease of an instance elsewhere is not taken over', { skip }, async t => {
  const prefix = 'tleasefresh'
  await cleanupPrefix(t, prefix)
  await plant(prefix, { id: 'alive', host: 'elsewhere.invalid', pid: 4242, startedAt: '2026-01-01T00:00:00Z' }, Date.now() - 5_000)
  await t.rejects(buildSandboxApp(t, prefix, { leaseTimeoutS: 60 }, await dataDir(prefix)),
    { message: /SANDBOX_PREFIX 'tleasefresh' is in use .*\(host elsewhere\.invalid, pid 4242, started 2026-01-01T00:00:00Z, last renewal [5-9] s ago\).*a lease not renewed for 60 s is taken over/ })
  t.equal((await currentLease(prefix))?.holder.id, 'alive', 'the holder keeps it')
})

t.test('a lease whose holder is provably dead (same host, its process gone) is taken over at once', { skip }, async t => {
  const prefix = 'tleasedead'
  await cleanupPrefix(t, prefix)
  const child = spawn(process.execPath, ['-e', ''])
  const pid = child.pid ?? 0
  await new Promise(resolve => child.on('exit', resolve))
  await plant(prefix, { id: 'dead', host: hostname(), pid, startedAt: '2026-01-01T00:00:00Z' }, Date.now())
  await buildSandboxApp(t, prefix, { leaseTimeoutS: 600 }, await dataDir(prefix))
  t.equal((await currentLease(prefix))?.holder.pid, process.pid, 'taken over without waiting for the timeout')
})

t.test('different prefixes coexist; a holder renews its lease and notices a takeover', { skip }, async t => {
  const [p1, p2] = ['tleasea', 'tleaseb']
  await cleanupPrefix(t, p1)
  await cleanupPrefix(t, p2)
  // Counts the renewals that found the lease gone: the holder's notice of a takeover (a timer of its own).
  let refusedRenewals = 0
  const client = wrapClient(real => ({
    renewLease: async (token, at) => {
      const kept = await real.renewLease(token, at)
      if (!kept) refusedRenewals++
      return kept
    }
  }))
  const a = await buildSandboxApp(t, p1, { leaseTimeoutS: 3, client }, await dataDir(p1))
  const b = await buildSandboxApp(t, p2, {}, await dataDir(p2))
  await a.service.ensure('coexist')
  await b.service.ensure('coexist')
  t.not(a.service.network()?.name, b.service.network()?.name)
  const before = await currentLease(p1)
  await sleep(2500)
  const after = await currentLease(p1)
  t.ok(before !== null && after !== null && after.renewedAt > before.renewedAt, 'renewed every third of the timeout')
  // Someone takes the lease away (as a takeover would): the holder stops creating sandboxes.
  const engine = testDockerClient()
  t.teardown(() => { engine.close() })
  await engine.breakLease(after?.token ?? '')
  const usurped = await plant(p1, { id: 'usurper', host: 'elsewhere.invalid', pid: 7, startedAt: '2026-01-01T00:00:00Z' }, Date.now())
  // The usurper is alive: it renews as a server would (every second of the 3 s timeout). Without this, a
  // busy machine let its lease age past two missed renewals, and the old holder rightly waited it out.
  const renewing = setInterval(() => { engine.renewLease(usurped, Date.now()).catch(() => {}) }, 1000)
  t.teardown(() => { clearInterval(renewing) })
  // Its next renewal finds the lease gone; a fixed 1.5 s wait missed it when a busy host ran the timer late.
  t.ok(await pollUntil(() => refusedRenewals, n => n > 0, 20_000) > 0, 'the holder\'s next renewal found the lease taken')
  await t.rejects(a.service.ensure('another-chat'), { code: 'SANDBOX_FAILED' }, 'no new sandbox without the lease')
  t.equal((await currentLease(p1))?.holder.id, 'usurper', 'the new holder is left alone')
})
