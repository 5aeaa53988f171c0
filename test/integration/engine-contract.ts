/*
 * The engine contract (docs/contract.md#engines): what the sandbox core relies on from a SandboxEngine
 * (plugins/sandbox/types.ts), checked against a real engine. Every engine runs it: Docker today
 * (engine-docker.test.ts), a Kubernetes engine tomorrow. Everything it creates carries
 * `cu.prefix=<prefix>`, so the caller cleans up by label.
 */
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'
import pino from 'pino'
import type { Readable } from 'node:stream'
import type { ExecProcess, SandboxEngine, SandboxSpec } from '../../plugins/sandbox/types.js'
import { createSandboxService } from '../../plugins/sandbox/service.js'
import { parseOptions } from '../../core/config.js'
import { SandboxOptions } from '../../plugins/sandbox/schemas.js'

export interface ContractOptions {
  /** a fresh engine (closed by the suite) */
  engine: () => SandboxEngine
  /** an engine pointed at nothing (its engine is unreachable) */
  unreachable: () => SandboxEngine
  image: string
  /** unique per test file: names and the `cu.prefix` label */
  prefix: string
}

const MiB = 1024 * 1024

/** Collects a process's output (decoded by the engine) until both its streams ended. */
/** `stdin` is written, then closed unless `keepOpen` (a TTY: closing it may end the session before its output). */
export async function collect (p: ExecProcess, stdin?: string, keepOpen = false): Promise<{ stdout: string, stderr: string }> {
  const read = async (r: Readable): Promise<string> => {
    const chunks: Buffer[] = []
    for await (const c of r) chunks.push(c as Buffer)
    return Buffer.concat(chunks).toString('utf8')
  }
  if (stdin !== undefined) { p.stdin?.write(stdin); if (!keepOpen) p.stdin?.end() }
  const [stdout, stderr] = await Promise.all([read(p.stdout), read(p.stderr)])
  return { stdout, stderr }
}

/** Waits until the process prints `text` on stdout (the rest is still readable afterwards through `seen`). */
async function printed (p: ExecProcess, text: string): Promise<{ seen: () => string }> {
  let out = ''
  await new Promise<void>(resolve => {
    p.stdout.on('data', (c: Buffer) => { out += c.toString('utf8'); if (out.includes(text)) resolve() })
    p.stderr.resume()
  })
  return { seen: () => out }
}

function spec (o: ContractOptions, name: string, bindDir: string): SandboxSpec {
  const labels = { 'managed-by': 'computer-use-server', 'cu.prefix': o.prefix, 'cu.contract': name }
  return {
    name: `${o.prefix}-${name}`,
    image: o.image,
    command: ['sleep', 'infinity'],
    hostname: `sbx-${name}`,
    user: 'assistant',
    workdir: '/home/assistant',
    env: ['CONTRACT_VAR=yes'],
    labels,
    mounts: [
      { type: 'volume', source: `${o.prefix}-home-${name}`, target: '/home/assistant', readOnly: false, volumeLabels: labels },
      { type: 'bind', source: bindDir, target: '/mnt/contract', readOnly: true }
    ],
    tmpfs: { '/tmp': 'rw,nosuid,nodev,size=16777216,mode=1777' },
    limits: { memory: 256 * MiB, cpus: 0.5, pids: 128, disk: 0, shm: 64 * MiB },
    network: 'none',
    security: { dropCapabilities: true, noNewPrivileges: true, init: true, disableIpv6: false }
  }
}

async function reasonOf (p: Promise<unknown>): Promise<string | undefined> {
  try { await p } catch (err) { return (err as { reason?: string }).reason ?? `no reason: ${(err as Error).message}` }
  return 'resolved'
}

export async function engineContract (t: Test, o: ContractOptions): Promise<void> {
  const engine = o.engine()
  t.teardown(() => { engine.close() })
  const bindDir = await mkdtemp(join(tmpdir(), `${o.prefix}-bind-`))
  t.teardown(async () => { await rm(bindDir, { recursive: true, force: true }) })
  await chmod(bindDir, 0o755)
  await writeFile(join(bindDir, 'seen.txt'), 'from the host\n', { mode: 0o644 })
  const s1 = spec(o, 'one', bindDir)
  let id = ''

  t.test('ping and image presence', async t => {
    await engine.ping(3000)
    t.match(await engine.imageId(o.image), /\S/, 'the sandbox image is present')
    t.equal(await engine.imageId(`${o.prefix}-no-such-image:none`), null, 'a missing image is null, never pulled')
  })

  t.test('create from the spec: inspect shows labels, limits, mounts, env, tmpfs, network', async t => {
    const created = await engine.create(s1)
    if (created === 'conflict') { t.fail('fresh name reported as a conflict'); return }
    id = created.id
    const d = await engine.inspect(s1.name)
    t.equal(d?.id, id, 'found by name')
    t.equal(d?.name, s1.name)
    t.equal(d?.running, false, 'created, not started')
    t.match(d?.labels, s1.labels)
    t.equal(d?.memory, 256 * MiB)
    t.equal(d?.cpus, 0.5)
    t.equal(d?.pids, 128)
    t.equal(d?.diskQuota, 0)
    t.equal(d?.network, 'none')
    t.same(d?.tmpfs, s1.tmpfs)
    t.ok(d?.env.includes('CONTRACT_VAR=yes'), 'env as given')
    const mounts = [...(d?.mounts ?? [])].sort((a, b) => a.target < b.target ? -1 : 1)
    t.same(mounts, [
      { type: 'volume', source: `${o.prefix}-home-one`, target: '/home/assistant', readOnly: false },
      { type: 'bind', source: bindDir, target: '/mnt/contract', readOnly: true }
    ])
    t.equal(await engine.create(s1), 'conflict', 'a second create with the same name is a conflict')
    t.ok((await engine.listVolumes([`cu.prefix=${o.prefix}`])).some(v => v.name === `${o.prefix}-home-one`), 'the volume was made with its labels')
  })

  t.test('start is idempotent; hostname, user, bind mount and limits hold inside', async t => {
    await engine.start(id)
    await engine.start(id)
    t.equal((await engine.inspect(id))?.running, true)
    const h = await engine.exec(id, { argv: ['sh', '-c', 'hostname; id -un; pwd; cat /mnt/contract/seen.txt; echo $CONTRACT_VAR'], user: 'assistant', cwd: '/home/assistant' })
    t.same((await collect(h)).stdout.split('\n'), ['sbx-one', 'assistant', '/home/assistant', 'from the host', 'yes', ''])
    const listed = await engine.list([`cu.prefix=${o.prefix}`, 'cu.contract=one'])
    t.same(listed.map(c => [c.id, c.name, c.running]), [[id, s1.name, true]], 'listed by label')
    const stats = await engine.stats(id)
    t.equal(stats.pids.limit, 128, 'the engine reports the pids limit')
    t.equal(stats.memory.limit, 256 * MiB, 'and the memory limit')
  })

  t.test('exec: separate stdout and stderr, the process resolves with its exit code, stdin, env and cwd', async t => {
    const h = await engine.exec(id, { argv: ['sh', '-c', 'echo out; echo err >&2; exit 3'], user: 'assistant' })
    t.equal(h.stdin, null, 'no stdin unless asked for')
    t.same(await collect(h), { stdout: 'out\n', stderr: 'err\n' })
    t.same(await h.exit, { code: 3, notStarted: false })
    t.equal(await h.started(), true, 'an ended process had started')
    const cat = await engine.exec(id, { argv: ['sh', '-c', 'cat; echo " $X $(pwd)"'], user: 'assistant', cwd: '/tmp', env: ['X=42'], stdin: true })
    t.same(await collect(cat, 'piped'), { stdout: 'piped 42 /tmp\n', stderr: '' })
    t.same(await cat.exit, { code: 0, notStarted: false })
  })

  t.test('TTY exec: one stream, resize reaches the terminal', async t => {
    const h = await engine.exec(id, { argv: ['sh', '-c', 'read go; stty size'], user: 'assistant', tty: true, stdin: true })
    // The terminal exists once the process runs: resize once it has started, then let it print.
    for (let i = 0; i < 20 && !await h.started(); i++) await new Promise(resolve => setTimeout(resolve, 50))
    await h.resize(100, 30)
    const out = await collect(h, 'go\n', true)
    t.match(out.stdout, /30 100/, 'rows and columns as resized')
    t.equal(out.stderr, '', 'a TTY has no separate stderr')
    t.equal((await h.exit).code, 0)
  })

  t.test('signals reach the process and what it started; close() detaches at once', async t => {
    const h = await engine.exec(id, { argv: ['sh', '-c', 'trap "echo term; exit 7" TERM; echo ready; sleep 600'], user: 'assistant' })
    const out = await printed(h, 'ready\n')
    await h.signal('TERM')
    t.same(await h.exit, { code: 7, notStarted: false }, 'the trap ran and its status is the exit code')
    t.equal(out.seen(), 'ready\nterm\n')
    const child = await engine.exec(id, { argv: ['sh', '-c', 'sleep 600 & echo started; wait'], user: 'assistant' })
    await printed(child, 'started\n')
    await child.signal('KILL')
    t.equal((await child.exit).code, 137, 'KILL ends the process and its child (the stream ends)')
    const left = await engine.exec(id, { argv: ['sh', '-c', 'sleep 601 & echo started; wait'], user: 'assistant' })
    await printed(left, 'started\n')
    const t0 = Date.now()
    left.close()
    t.same(await left.exit, { code: null, notStarted: false }, 'closed while running: no status')
    t.ok(Date.now() - t0 < 5000, 'and at once')
  })

  t.test('putFile: mode and owner as given; a missing parent is no-such-path', async t => {
    await engine.putFile(id, '/home/assistant/put.txt', Buffer.from('data'), 0o640, 1000, 1000)
    const h = await engine.exec(id, { argv: ['sh', '-c', 'stat -c "%a %u %g %s" /home/assistant/put.txt; cat /home/assistant/put.txt'], user: 'assistant' })
    t.equal((await collect(h)).stdout, '640 1000 1000 4\ndata')
    t.equal(await reasonOf(engine.putFile(id, '/home/assistant/no/such/dir/x', Buffer.from('x'), 0o644, 0, 0)), 'no-such-path')
  })

  t.test('claim: found by the new name (with the labels where the engine sets them); a taken name is a conflict; a missing sandbox is false', async t => {
    const s2 = spec(o, 'two', bindDir)
    const other = await engine.create(s2)
    t.not(other, 'conflict')
    const labels = { 'cu.chat-key': '0123456789abcdef0123456789abcdef' }
    t.equal(await engine.claim(id, { name: `${o.prefix}-renamed`, labels }), true)
    const claimed = await engine.inspect(`${o.prefix}-renamed`)
    t.equal(claimed?.id, id)
    t.equal(claimed?.running, true, 'still running: a claim does not restart the sandbox')
    if (engine.labelsAtClaim) t.match(claimed?.labels, labels, 'the labels are set')
    else t.equal(claimed?.labels['cu.chat-key'], undefined, 'an engine that cannot relabel ignores them')
    t.equal(await engine.inspect(s1.name), null, 'the old name is free')
    t.equal(await engine.claim(id, { name: s2.name, labels }), 'conflict')
    t.equal(await engine.claim(`${o.prefix}-no-such-sandbox`, { name: `${o.prefix}-x`, labels }), false)
    // A created but never started sandbox refuses an exec as not running (the core's recovery signal).
    const r = await reasonOf(engine.exec((other as { id: string }).id, { argv: ['true'] }))
    t.ok(r === 'not-running' || r === 'conflict', `exec into a stopped sandbox: ${String(r)}`)
    await engine.remove((other as { id: string }).id)
  })

  t.test('stop, kill and remove are idempotent; a removed sandbox is no-such-sandbox', async t => {
    t.equal(await engine.stop(id, 1), true)
    t.equal(await engine.stop(id, 1), true, 'stopping a stopped sandbox succeeds')
    t.equal((await engine.inspect(id))?.running, false)
    await engine.kill(id)
    t.equal(await engine.stop(`${o.prefix}-no-such-sandbox`, 1), false, 'stop of a missing sandbox says so')
    await engine.kill(`${o.prefix}-no-such-sandbox`)
    await engine.start(id)
    await engine.kill(id)
    t.equal((await engine.inspect(id))?.running, false, 'killed')
    await engine.remove(id)
    await engine.remove(id)
    t.equal(await engine.inspect(id), null)
    t.equal(await reasonOf(engine.exec(id, { argv: ['true'] })), 'no-such-sandbox')
    t.ok((await engine.listVolumes([`cu.prefix=${o.prefix}`])).some(v => v.name === `${o.prefix}-home-one`), 'removing a sandbox keeps its volume')
  })

  t.test('volumes and the isolated network', async t => {
    const name = `${o.prefix}-vol-extra`
    await engine.createVolume(name, { 'cu.prefix': o.prefix, 'cu.contract': 'vol' })
    t.same((await engine.listVolumes([`cu.prefix=${o.prefix}`, 'cu.contract=vol'])).map(v => v.name), [name])
    await engine.removeVolume(name)
    await engine.removeVolume(name)
    t.same(await engine.listVolumes([`cu.prefix=${o.prefix}`, 'cu.contract=vol']), [])
    const net = `${o.prefix}-net`
    const first = await engine.ensureNetwork(net, { 'cu.prefix': o.prefix })
    t.match(first, { result: 'created', internal: true, isolated: true })
    t.match(await engine.ensureNetwork(net, { 'cu.prefix': o.prefix }), { result: 'exists', id: first.id })
    t.ok((await engine.listNetworks([`cu.prefix=${o.prefix}`])).some(n => n.id === first.id))
    await engine.removeNetwork(net)
    await engine.removeNetwork(net)
  })

  t.test('leases: one holder at a time by name, renewed and broken only through their own token', async t => {
    const name = `${o.prefix}-contract-lease`
    const holder = (id: string): { id: string, host: string, pid: number, startedAt: string } => ({ id, host: 'contract.test', pid: 4242, startedAt: '2026-01-01T00:00:00Z' })
    const labels = { 'cu.prefix': o.prefix }
    const first = await engine.acquireLease(name, holder('one'), { labels, image: o.image, now: 1_000_000 })
    t.equal(first.acquired, true)
    const token = first.acquired ? first.token : ''
    const second = await engine.acquireLease(name, holder('two'), { labels, image: o.image, now: 2_000_000 })
    t.match(second, { acquired: false, current: { holder: holder('one'), renewedAt: 1_000_000, token } }, 'the second sees the first holder and its renewal')
    t.equal(await engine.renewLease(token, 3_000_000), true)
    t.match(await engine.acquireLease(name, holder('two'), { labels, image: o.image, now: 4_000_000 }), { acquired: false, current: { renewedAt: 3_000_000 } }, 'a renewal is visible')
    await engine.breakLease(token)
    await engine.breakLease(token)
    t.equal(await engine.renewLease(token, 5_000_000), false, 'a broken lease cannot be renewed')
    const third = await engine.acquireLease(name, holder('three'), { labels, image: o.image, now: 6_000_000 })
    t.equal(third.acquired, true, 'a broken lease can be taken')
    if (third.acquired) {
      t.not(third.token, token)
      t.equal(await engine.renewLease(token, 7_000_000), false, 'the old token never touches the new holder')
      await engine.breakLease(token)
      t.match(await engine.acquireLease(name, holder('four'), { labels, image: o.image, now: 8_000_000 }), { acquired: false, current: { holder: holder('three'), token: third.token } })
      await engine.breakLease(third.token)
    }
  })

  t.test('an unreachable engine is an outage, and the core says so in neutral words', async t => {
    const dead = o.unreachable()
    t.teardown(() => { dead.close() })
    const err = await dead.ping(2000).then(() => null, (e: unknown) => e as { unavailable?: boolean, busy?: boolean })
    t.equal(err?.unavailable, true, 'unavailable, not busy')
    t.equal(err?.busy, false)
    const opts = parseOptions(SandboxOptions, { prefix: o.prefix, image: o.image, dataDir: bindDir }, 'sandbox')
    const service = createSandboxService({ ...opts, dataDirHost: bindDir, now: Date.now }, dead, pino({ level: 'silent' }))
    t.teardown(async () => { await service.close() })
    await t.rejects(service.ensure('contract-down'), { code: 'SANDBOX_ENGINE_UNAVAILABLE', message: `${dead.label.engine} is not reachable; try again shortly` })
  })
}
