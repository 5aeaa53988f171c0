/*
 * The Docker engine's agent socket without Docker (docs/engine.md#the-agent-socket): the listener, the
 * handshake's verdicts and bounds, and the run directories, driven by a client in this process that
 * plays the agent (or a sandbox process posing as one).
 */
import { createHmac } from 'node:crypto'
import { mkdir, mkdtemp, readdir, rm, stat, symlink, writeFile } from 'node:fs/promises'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { RunDirs } from '../../../plugins/sandbox-docker/agent-run-dir.js'
import { AgentSockets } from '../../../plugins/sandbox-docker/agent-socket.js'

const quiet = { warn: () => {}, debug: () => {} }

async function setup (t: Test): Promise<{ root: string, dirs: RunDirs, sockets: AgentSockets, token: string, path: string }> {
  const root = join(await mkdtemp(join(tmpdir(), 'agent-sock-')), 'run')
  t.teardown(async () => { await rm(join(root, '..'), { recursive: true, force: true }) })
  const dirs = new RunDirs(root, '/host/view/run')
  const sockets = new AgentSockets(dirs, quiet)
  t.teardown(() => { sockets.close() })
  const token = RunDirs.newToken()
  t.equal(await dirs.prepare(token), `/host/view/run/${token}/s`, 'the mount source is the daemon\'s view')
  return { root, dirs, sockets, token, path: join(root, token, 's', 'agent.sock') }
}

/** Reads exactly n bytes, or what came before the stream closed. */
async function readN (sock: Socket, n: number): Promise<Buffer> {
  return await new Promise(resolve => {
    let got = Buffer.alloc(0)
    const onData = (d: Buffer): void => {
      got = Buffer.concat([got, d])
      if (got.length >= n) { sock.off('data', onData); sock.pause(); resolve(got.subarray(0, n)) }
    }
    sock.on('data', onData)
    sock.resume()
    sock.once('close', () => { resolve(got) })
  })
}

/** Connects and answers the greeting with `answer(nonce)`; resolves with the verdict ('' = closed). */
async function shake (path: string, answer: (nonce: Buffer) => Buffer): Promise<{ verdict: string, key: Buffer, sock: Socket }> {
  const sock = connect(path)
  sock.on('error', () => {})
  const greeting = await readN(sock, 37)
  if (greeting.length < 37) return { verdict: '', key: Buffer.alloc(0), sock }
  sock.write(answer(greeting.subarray(5)))
  const reply = await readN(sock, 33)
  return { verdict: reply.subarray(0, 1).toString(), key: reply.subarray(1), sock }
}

const fresh = (): Buffer => Buffer.concat([Buffer.from('F'), Buffer.alloc(32)])
const resume = (key: Buffer) => (nonce: Buffer): Buffer => Buffer.concat([Buffer.from('R'), createHmac('sha256', key).update(nonce).digest()])

t.test('after close, a sandbox learnt late (an inspect of a call still finishing) is not listened for', async t => {
  const { sockets, token, path } = await setup(t)
  sockets.close()
  const slot = sockets.note('c1', token)
  await sockets.watch(slot)
  await sockets.beforeStart(slot)
  t.equal(slot.server, null, 'no listening socket: nothing would close it, and it kept the process alive')
  await t.rejects(stat(path), { code: 'ENOENT' })
  t.equal(sockets.known('c1'), undefined)
})

t.test('one fresh agent per start, then only the holder of its key', async t => {
  const { dirs, sockets, token, path } = await setup(t)
  const slot = sockets.note('c1', token)
  await sockets.beforeStart(slot)
  t.equal((await stat(path)).mode & 0o777, 0o666, 'the socket is connectable by the sandbox user')
  const early = shake(path, fresh)
  await new Promise(resolve => setTimeout(resolve, 50))
  sockets.afterStart(slot, true)
  const first = await early
  t.equal(first.verdict, 'K', 'the fresh agent that came during the start gets a key once the start is real')
  t.same(await dirs.readKey(token), first.key, 'the key is kept on the host')
  const channel = await sockets.channel(slot)
  t.equal(channel !== null, true, 'the core gets the connection')
  t.equal(await sockets.channel(slot), null, 'handed out once')
  first.sock.write('after the handshake')
  t.equal((await readN(channel as Socket, 19)).toString(), 'after the handshake', 'the agent\'s bytes after the verdict reach the core')
  t.equal((await shake(path, fresh)).verdict, '', 'no one is greeted while the agent is connected')
  channel?.destroy()
  await new Promise(resolve => setTimeout(resolve, 50))
  t.equal((await shake(path, fresh)).verdict, '', 'a second fresh agent is refused')
  t.equal((await shake(path, resume(Buffer.alloc(32, 7)))).verdict, '', 'a made-up key is refused')
  const back = await shake(path, resume(first.key))
  t.equal(back.verdict, 'O', 'the agent comes back with its key')
  back.sock.destroy()
})

t.test('no fresh agent after a start that was none, or after the first exec', async t => {
  const { sockets, token, path } = await setup(t)
  const slot = sockets.note('c2', token)
  await sockets.beforeStart(slot)
  sockets.afterStart(slot, false)
  t.equal((await shake(path, fresh)).verdict, '', 'already running (304): refused')
  await sockets.beforeStart(slot)
  sockets.afterStart(slot, true)
  const exec = sockets.beforeExec('c2')
  const agent = await shake(path, fresh)
  await exec
  t.equal(agent.verdict, 'K', 'the exec waited for the fresh agent')
  agent.sock.destroy()
  await new Promise(resolve => setTimeout(resolve, 50))
  t.equal((await shake(path, fresh)).verdict, '', 'after the exec a fresh agent is refused')
})

t.test('malformed answers are refused; a connect loop stops the listening for a while', async t => {
  const { sockets, token, path } = await setup(t)
  const slot = sockets.note('c3', token)
  await sockets.beforeStart(slot)
  sockets.afterStart(slot, true)
  t.equal((await shake(path, () => Buffer.concat([fresh(), Buffer.from('HELLO too early')]))).verdict, '', 'bytes beyond the answer')
  t.equal((await shake(path, () => Buffer.concat([Buffer.from('X'), Buffer.alloc(32)]))).verdict, '', 'an unknown mode')
  t.equal((await shake(path, () => Buffer.from('F'))).verdict === '', true, 'a short answer is not taken')
  for (let i = 0; i < 25; i++) (await shake(path, () => Buffer.from('X'.repeat(33)))).sock.destroy()
  await new Promise(resolve => setTimeout(resolve, 50))
  t.same(await readdir(join(path, '..')), [], 'the socket is gone during the cool-down')
})

t.test('run directories refuse symlinks and foreign tokens; the sweep keeps live ones', async t => {
  const root = join(await mkdtemp(join(tmpdir(), 'agent-dirs-')), 'run')
  t.teardown(async () => { await rm(join(root, '..'), { recursive: true, force: true }) })
  const dirs = new RunDirs(root, root)
  await t.rejects(dirs.prepare('../../etc'), { name: 'RunDirError' })
  const token = RunDirs.newToken()
  await mkdir(root, { recursive: true })
  await symlink('/tmp', join(root, token))
  await t.rejects(dirs.prepare(token), { name: 'RunDirError' }, 'a symlink in place of the directory')
  const other = RunDirs.newToken()
  await dirs.prepare(other)
  t.equal((await stat(join(root, other))).mode & 0o777, 0o700)
  t.equal((await stat(join(root, other, 's'))).mode & 0o777, 0o755)
  await writeFile(join(root, 'target'), Buffer.alloc(32, 1))
  await symlink(join(root, 'target'), join(root, other, 'key'))
  t.equal(await dirs.readKey(other), null, 'a key file that is a symlink is not read')
  await dirs.writeKey(other, Buffer.alloc(32, 2))
  t.same(await dirs.readKey(other), Buffer.alloc(32, 2))
  t.equal((await stat(join(root, other, 'key'))).mode & 0o777, 0o600)
  const dead = RunDirs.newToken()
  await dirs.prepare(dead)
  t.equal(await dirs.sweep(new Set([other])), 2, 'the dead token\'s directory and the planted symlink go')
  t.same((await readdir(root)).sort(), [other, 'target'].sort())
})
