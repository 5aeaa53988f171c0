/*
 * The Docker engine's egress socket without Docker (docs/network.md#egress-over-the-agent-socket): egress.sock
 * in a sandbox's run directory, bound through the directory's descriptor, hands each connection to the
 * handler with the id of the sandbox whose socket accepted it, bounds the open connections of one sandbox,
 * refuses a run directory that is a symlink, and goes away with stop().
 */
import { mkdtemp, rm, stat, symlink } from 'node:fs/promises'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { RunDirs } from '../../../plugins/sandbox-docker/agent-run-dir.js'
import { EgressSockets, MAX_OPEN } from '../../../plugins/sandbox-docker/egress-socket.js'

const quiet = { warn: () => {} }
const sleep = async (ms: number): Promise<void> => await new Promise(resolve => setTimeout(resolve, ms))

async function setup (t: Test): Promise<{ root: string, dirs: RunDirs, egress: EgressSockets }> {
  const root = join(await mkdtemp(join(tmpdir(), 'egress-sock-')), 'run')
  t.teardown(async () => { await rm(join(root, '..'), { recursive: true, force: true }) })
  const dirs = new RunDirs(root, root)
  const egress = new EgressSockets(dirs, quiet)
  t.teardown(() => { egress.close() })
  return { root, dirs, egress }
}

async function dial (path: string): Promise<Socket> {
  const s = connect(path)
  await new Promise<void>((resolve, reject) => { s.once('connect', resolve); s.once('error', reject) })
  return s
}

t.test('each sandbox\'s socket hands its connections over with that sandbox\'s id, never another\'s', async t => {
  const { root, dirs, egress } = await setup(t)
  t.equal(await egress.listen('box-1', RunDirs.newToken()), false, 'not serving yet: nothing is bound')
  const seen: Array<{ id: string, data: string }> = []
  egress.serve((id, sock) => { sock.once('data', (d: Buffer) => { seen.push({ id, data: d.toString() }); sock.end('ok') }) })
  const t1 = RunDirs.newToken()
  const t2 = RunDirs.newToken()
  await dirs.prepare(t1)
  await dirs.prepare(t2)
  t.ok(await egress.listen('box-1', t1))
  t.ok(await egress.listen('box-2', t2))
  t.ok(await egress.listen('box-1', t1), 'listening again is a no-op')
  const p1 = join(root, t1, 's', 'egress.sock')
  t.equal((await stat(p1)).mode & 0o777, 0o666, 'connectable by the sandbox user')
  // What the sandbox sends says nothing about who it is.
  const c2 = await dial(join(root, t2, 's', 'egress.sock'))
  c2.write('I am box-1')
  const c1 = await dial(p1)
  c1.write('hello')
  while (seen.length < 2) await sleep(10)
  t.same(seen.sort((a, b) => a.id < b.id ? -1 : 1), [{ id: 'box-1', data: 'hello' }, { id: 'box-2', data: 'I am box-1' }])
  c1.destroy()
  c2.destroy()
  egress.stop('box-1')
  await sleep(50)
  await t.rejects(stat(p1), 'stop removes the socket')
  await t.rejects(dial(p1), 'and nothing answers there')
})

t.test('at most MAX_OPEN connections of one sandbox are open; more are closed at accept', async t => {
  const { dirs, root, egress } = await setup(t)
  const held: Socket[] = []
  egress.serve((_id, sock) => { held.push(sock) })
  const token = RunDirs.newToken()
  await dirs.prepare(token)
  t.ok(await egress.listen('box', token))
  const path = join(root, token, 's', 'egress.sock')
  const clients: Socket[] = []
  for (let i = 0; i < MAX_OPEN + 20; i++) clients.push(await dial(path))
  await sleep(300)
  t.equal(held.length, MAX_OPEN, `${MAX_OPEN} handed over, the rest closed`)
  const closed = clients.filter(c => c.destroyed || c.readableEnded).length
  t.comment(`${closed} client sockets saw their end`)
  for (const c of clients) c.destroy()
})

t.test('a run directory replaced by a symlink is not listened in', async t => {
  const { dirs, root, egress } = await setup(t)
  egress.serve(() => {})
  const token = RunDirs.newToken()
  await dirs.prepare(token)
  const elsewhere = await mkdtemp(join(tmpdir(), 'egress-elsewhere-'))
  t.teardown(async () => { await rm(elsewhere, { recursive: true, force: true }) })
  await rm(join(root, token, 's'), { recursive: true })
  await symlink(elsewhere, join(root, token, 's'))
  t.equal(await egress.listen('box', token), false)
  await t.rejects(stat(join(elsewhere, 'egress.sock')), 'nothing bound through the link')
})

t.test('a stop while the socket is still being bound (a removal beside a listing) leaves nothing listening', async t => {
  const { dirs, root, egress } = await setup(t)
  egress.serve(() => {})
  const token = RunDirs.newToken()
  await dirs.prepare(token)
  const binding = egress.listen('box', token)
  egress.stop('box')
  await binding
  await sleep(50)
  const path = join(root, token, 's', 'egress.sock')
  await t.rejects(stat(path), 'no socket left')
  await t.rejects(dial(path), 'nothing answers')
})
