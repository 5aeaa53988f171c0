/*
 * The in-sandbox agent (docs/contract.md#in-sandbox-agent) on a real engine: commands and execs travel over one agent
 * stream per sandbox (no docker exec per call), concurrently and in order; the kill path and
 * cancellation still work; a killed or lying agent costs its own chat one lost call at most, and the
 * next calls work (docker exec meanwhile, the agent opened again after the backoff); an image without
 * the agent falls back to docker exec for good. Needs an image with the agent (DOCKER_IMAGE, e.g.
 * computer-use-sandbox:agent); OLD_IMAGE (default computer-use-sandbox:latest) is checked to have none.
 */
import t from 'tap'
import type { CommandOptions } from '../../plugins/sandbox/types.js'
import type { ExecSpec } from '../../plugins/sandbox/engine-types.js'
import { AGENT_ARGV } from '../../plugins/sandbox/agent-client.js'
import { buildSandboxApp, cleanupPrefix, dockerOrSkip, testDockerClient, wrapClient } from './docker.js'
import { pollUntil } from '../fixtures/poll.js'

const PREFIX = 'tagent'
const OLD_IMAGE = process.env.OLD_IMAGE ?? 'computer-use-sandbox:latest'
const { skip } = await dockerOrSkip()

t.test('in-sandbox agent (real Docker)', { skip }, async t => {
  await cleanupPrefix(t, PREFIX)
  const execs: string[] = []
  const client = wrapClient(real => ({
    exec: async (id: string, spec: ExecSpec) => { execs.push(spec.argv.join(' ').slice(0, 60)); return await real.exec(id, spec) }
  }))
  const { app } = await buildSandboxApp(t, PREFIX, { killGraceMs: 2000, client, agent: true })
  const sandbox = app.sandbox
  const chat = 'agent-1'
  await sandbox.ensure(chat)
  const isAgent = (a: string): boolean => a.startsWith(AGENT_ARGV.join(' ').slice(0, 20))

  async function run (command: string, opts: Partial<CommandOptions> = {}): Promise<{ out: string, exitCode: number | null, timedOut: boolean, cancelled: boolean, notices?: unknown[], ms: number }> {
    let out = ''
    const t0 = performance.now()
    const r = await sandbox.runCommand(chat, command, { timeoutMs: 30_000, onOutput: s => { out += s }, ...opts })
    return { out, ...r, ms: performance.now() - t0 }
  }

  t.test('one agent stream serves every call: no docker exec per command or exec', async t => {
    t.equal((await run('echo warm')).out, 'warm\n')
    execs.length = 0
    for (let i = 0; i < 5; i++) t.equal((await run(`echo $((${i} * 2)); echo err >&2`)).out, `${i * 2}\nerr\n`)
    const r = await sandbox.exec(chat, ['sh', '-c', 'echo out; echo err >&2; exit 4'])
    t.same({ code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() }, { code: 4, out: 'out\n', err: 'err\n' })
    t.equal((await sandbox.exec(chat, ['wc', '-c'], { stdin: Buffer.alloc(700_000, 1) })).stdout.toString().trim(), '700000', 'stdin in chunks')
    const capped = await sandbox.exec(chat, ['head', '-c', '100000', '/dev/zero'], { maxBytes: 1000 })
    t.same([capped.stdout.length, capped.truncated, capped.exitCode], [1000, true, 0], 'maxBytes cap')
    t.equal((await sandbox.exec(chat, ['pwd'], { cwd: '/tmp', env: { X: '1' } })).stdout.toString(), '/tmp\n', 'cwd')
    t.equal((await run('echo "$CUSTOM:$PAGER"', { env: { CUSTOM: 'v' } })).out, 'v:cat\n', 'env')
    t.same(execs, [], 'no docker exec at all')
    t.equal((await sandbox.exec(chat, ['id', '-un'], { user: 'root' })).stdout.toString(), 'root\n', 'root still goes through docker exec')
    t.equal(execs.length, 1)
  })

  t.test('file operations: stat, bounded reads and atomic writes as assistant, no docker exec', async t => { // docs/contract.md#in-sandbox-agent
    const op = sandbox.fileOp
    if (op === undefined) { t.fail('the driver has no fileOp'); return }
    const file = async (o: Parameters<typeof op>[1]): Promise<Awaited<ReturnType<typeof op>>> => await op(chat, o, { timeoutMs: 10_000 })
    await run('mkdir -p /home/assistant/fo && cd /home/assistant/fo && printf 0123456789 > ten && mkfifo pipe && ln -s ten link && ln -s nowhere dangling && chmod 750 . && printf x > ro && chmod 400 ro')
    execs.length = 0
    const w = await file({ op: 'write', path: '/home/assistant/fo/new/deep/a.txt', data: Buffer.from('hello') })
    t.same([w?.ok, w?.existed], [true, false], 'write creates parents')
    const w2 = await file({ op: 'write', path: '/home/assistant/fo/link', data: Buffer.from('через') })
    t.same([w2?.ok, w2?.existed], [true, true], 'a write through a symlink replaces its target')
    const st = await file({ op: 'stat', path: '/home/assistant/fo/link' })
    t.same([st?.ok, st?.kind, st?.link, st?.size], [true, 'file', true, 10], 'stat follows the link and says it is one')
    const head = await file({ op: 'read', path: '/home/assistant/fo/ten', max: 4 })
    t.same([head?.data.toString(), head?.size], ['че', 10], 'read returns at most max bytes and the size')
    const tail = await file({ op: 'read', path: '/home/assistant/fo/ten', max: 2, offset: -2 })
    t.equal(tail?.data.toString(), 'з', 'a negative offset reads from the end')
    const fifo = await file({ op: 'read', path: '/home/assistant/fo/pipe', max: 10 })
    t.same([fifo?.ok, fifo?.errno, fifo?.kind], [false, 0, 'fifo'], 'a FIFO is refused without blocking the agent')
    t.same([(await file({ op: 'stat', path: '/home/assistant/fo/dangling' }))?.errno, (await file({ op: 'read', path: '/nope', max: 1 }))?.errno], [2, 2], 'missing paths answer ENOENT')
    const dir = await file({ op: 'stat', path: '/home/assistant/fo' })
    t.same([dir?.kind, dir?.mode], ['dir', 0o750])
    const denied = await file({ op: 'write', path: '/etc/cubicle-agent-test', data: Buffer.from('no') })
    t.same([denied?.ok, denied?.errno], [false, 13], 'assistant cannot write /etc')
    t.equal((await file({ op: 'write', path: '/home/assistant/fo/ro', data: Buffer.from('yes') }))?.ok, true, 'a read-only file in a writable dir is replaced (as rename allows)')
    t.equal((await run('cat /home/assistant/fo/new/deep/a.txt; stat -c "%U %a" /home/assistant/fo/new/deep/a.txt; ls -A /home/assistant/fo/new/deep')).out, 'helloassistant 644\na.txt\n', 'owner, mode, no temp file left')
    t.same(execs, [], 'no docker exec')
    const big = await file({ op: 'write', path: '/home/assistant/fo/big', data: Buffer.alloc(9 * 1024 * 1024) })
    t.equal(big, undefined, 'a write larger than one frame is left to the exec path')
  })

  t.test('listening TCP sockets from the agent (sock_diag inside the sandbox), no docker exec', async t => { // docs/performance.md
    const op = sandbox.fileOp
    if (op === undefined) { t.fail('the driver has no fileOp'); return }
    // IPv6 is off in sandboxes by default (the host agent test covers ::1: test/plugins/sandbox/agent-script.test.ts).
    await run('(python3 -m http.server 8123 --bind 127.0.0.1 >/dev/null 2>&1 &); for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/8123) 2>/dev/null && break; sleep 0.1; done')
    execs.length = 0
    const r = await op(chat, { op: 'listening', max: 4096 }, { timeoutMs: 10_000 })
    t.equal(r?.ok, true, `answered: ${r?.error ?? ''}`)
    t.ok(r?.sockets?.some(s => s.family === 4 && s.address === '127.0.0.1' && s.port === 8123), '127.0.0.1:8123')
    t.notOk(r?.sockets?.some(s => s.port === 8000), 'only what listens')
    t.same(execs, [], 'no docker exec')
    await run('pkill -f "http.server 8123" || true')
  })

  t.test('the agent\'s modules are compiled in the image, root\'s and read-only, and its start uses them', async t => { // docs/engine.md#the-agent-socket
    // Owners, modes and write access as `assistant` sees them: a .pyc it could replace would be code run in the agent.
    const check = `
import json, os, sys
d = '/opt/cubicle-agent/__pycache__'
rows = {p: [os.stat(p).st_uid, oct(os.stat(p).st_mode & 0o7777), os.access(p, os.W_OK)] for p in [d] + [os.path.join(d, n) for n in sorted(os.listdir(d))]}
print(json.dumps({'uid': os.getuid(), 'rows': rows}))`
    const r = JSON.parse((await run(`python3 -I -c '${check.replace(/'/g, '"')}'`)).out) as { uid: number, rows: Record<string, [number, string, boolean]> }
    t.equal(r.uid, 1000, 'checked as assistant')
    t.same(Object.keys(r.rows).map(p => p.split('/').pop()).sort(), ['__pycache__', 'cubicle_agent.cpython-311.pyc', 'cubicle_connect.cpython-311.pyc', 'cubicle_egress.cpython-311.pyc', 'cubicle_files.cpython-311.pyc', 'cubicle_socket.cpython-311.pyc'], 'one per module')
    for (const [p, [uid, mode, writable]] of Object.entries(r.rows)) t.same([uid, mode, writable], [0, p.endsWith('.pyc') ? '0o644' : '0o755', false], `${p}: root's, ${mode}, not writable by assistant`)
    // python -v names where each module's code came from: the .pyc, never a compile of the source.
    const v = (await run('true | /usr/lib/cubicle-agent/python3 -I -S -v /opt/cubicle-agent/cubicle-agent.py 2>&1 >/dev/null | grep -a "code object from.*cubicle"')).out
    t.match(v, /code object from '\/opt\/cubicle-agent\/__pycache__\/cubicle_agent\.cpython-311\.pyc'/, 'the agent loads its compiled module')
    t.notMatch(v, /code object from \/opt\/cubicle-agent\/cubicle_/, 'and compiles none of them')
  })

  t.test('concurrent commands share the stream; a flood does not block a small command; output stays in order', async t => {
    const flood = run("head -c 30000000 /dev/zero | tr '\\0' x; echo end")
    await new Promise(resolve => setTimeout(resolve, 300))
    const small = await run('for i in 1 2 3 4 5; do echo $i; done')
    t.equal(small.out, '1\n2\n3\n4\n5\n', 'in order')
    const all = await Promise.all(Array.from({ length: 8 }, async (_, i) => await run(`sleep 0.$i; seq ${i * 1000}`)))
    for (const [i, r] of all.entries()) t.equal(r.out.split('\n').length - 1, i * 1000, `parallel ${i}`)
    const f = await flood
    t.equal(f.out.length, 30_000_004)
    t.ok(f.out.endsWith('xend\n'))
    const utf = await run("printf '\\xc3'; sleep 0.2; printf '\\xa9\\n'")
    t.equal(utf.out, 'é\n', 'UTF-8 sequence split across frames')
  })

  t.test('background child holding stdout; timeout kills the process group; cancel', async t => {
    const bg = await run('sleep 30 & echo started')
    t.same([bg.out, bg.exitCode], ['started\n', 0])
    t.ok(bg.ms < 1500, `returned in ${bg.ms.toFixed(0)} ms`)
    const to = await run('(sleep 301 &) ; setsid sleep 302 & sleep 303', { timeoutMs: 1500 })
    t.equal(to.timedOut, true)
    t.equal(to.exitCode, null)
    // The result comes when bash has ended; the kill pass's signals to the detached ones may still be on their way.
    t.equal(await pollUntil(async () => (await sandbox.exec(chat, ['pgrep', '-f', 'sleep 30[123]'])).exitCode, code => code === 1, 10_000), 1, 'no process of the command is left')
    const ac = new AbortController()
    setTimeout(() => { ac.abort() }, 500)
    const c = await run('sleep 304', { signal: ac.signal })
    t.equal(c.cancelled, true)
    t.ok(c.ms < 4000)
    // The kill path's SIGKILL follows killGraceMs after the SIGTERM as a docker exec of its own (by
    // design, as on the exec path): let it pass so that the next test counts only its own execs.
    await new Promise(resolve => setTimeout(resolve, 2500))
  })

  // A process of the sandbox kills the agent, as assistant (its own call through the agent is lost
  // too). Not as root: the sandbox drops every capability, so root has no CAP_KILL and cannot signal
  // assistant's processes (pkill fails with EPERM and the agent lives on).
  async function killAgent (): Promise<void> {
    await sandbox.exec(chat, ['pkill', '-f', 'cubicle-agent.py'])
  }

  t.test('killing the agent mid-command: a clear result, the next call works, the agent comes back', async t => {
    const pending = run('sleep 25; echo never')
    // Killed once the command runs (asked until it does, at most 20 s), not after a guess a busy host can miss.
    t.equal(await pollUntil(async () => (await sandbox.exec(chat, ['pgrep', '-f', '^sleep 25$'])).exitCode, code => code === 0, 20_000), 0, 'the command runs')
    await killAgent()
    const lost = await pending
    t.equal(lost.exitCode, null)
    t.match(lost.notices, [{ kind: 'stream-lost' }], 'told the stream was lost')
    execs.length = 0
    t.equal((await run('echo after')).out, 'after\n', 'next call works (docker exec during a backoff)')
    await new Promise(resolve => setTimeout(resolve, 2200))
    t.equal((await run('echo again')).out, 'again\n')
    t.equal((await run('echo again2')).out, 'again2\n')
    t.equal(execs.filter(isAgent).length, 1, 'the agent was started again, once')
    t.ok(execs.length <= 2, `and serves the calls (docker execs: ${JSON.stringify(execs)})`)
  })

  t.test('a replaced agent that answers garbage only loses its own call; the chat falls back', async t => {
    // What a hostile sandbox could make the agent say: hello, then bytes that are no frame.
    const fake = "import sys,struct,json\nb=json.dumps({'v':1}).encode(); h=struct.pack('>I',len(b))+b\n" +
      "sys.stdout.buffer.write(struct.pack('>IIB',len(h)+5,0,1)+h); sys.stdout.buffer.flush(); sys.stdin.buffer.read(9)\n" +
      "sys.stdout.buffer.write(b'\\xff'*64); sys.stdout.buffer.flush(); sys.stdin.buffer.read()\n"
    const real = await sandbox.exec(chat, ['cat', '/opt/cubicle-agent/cubicle-agent.py'])
    await sandbox.putFile(chat, '/opt/cubicle-agent/cubicle-agent.py', fake, { mode: 0o644 })
    t.teardown(async () => { await sandbox.putFile(chat, '/opt/cubicle-agent/cubicle-agent.py', real.stdout, { mode: 0o644 }).catch(() => {}) })
    await killAgent()
    await new Promise(resolve => setTimeout(resolve, 4500))
    const other = 'agent-2'
    await sandbox.ensure(other)
    const lied = await run('echo lied-to')
    t.equal(lied.exitCode, null, 'the call in flight ends as lost')
    t.equal((await run('echo still')).out, 'still\n', 'the next call runs (docker exec)')
    let out = ''
    t.equal((await sandbox.runCommand(other, 'echo fine', { timeoutMs: 10_000, onOutput: s => { out += s } })).exitCode, 0, 'another chat is unaffected')
    t.equal(out, 'fine\n')
  })
})

t.test('an image without the agent: docker exec for good, one log line', { skip }, async t => {
  const probe = testDockerClient()
  const old = await probe.imageId(OLD_IMAGE)
  probe.close()
  if (old === null) { t.comment(`${OLD_IMAGE} is missing: skipped`); return }
  const prefix = `${PREFIX}old`
  await cleanupPrefix(t, prefix)
  const execs: string[] = []
  const client = wrapClient(real => ({
    exec: async (id: string, spec: ExecSpec) => { execs.push(spec.argv.join(' ').slice(0, 60)); return await real.exec(id, spec) }
  }))
  const { app } = await buildSandboxApp(t, prefix, { image: OLD_IMAGE, client, agent: true })
  const chat = 'old-1'
  await app.sandbox.ensure(chat)
  for (let i = 0; i < 3; i++) {
    let out = ''
    const r = await app.sandbox.runCommand(chat, `echo old${i}`, { timeoutMs: 20_000, onOutput: s => { out += s } })
    t.same([out, r.exitCode], [`old${i}\n`, 0])
  }
  t.equal((await app.sandbox.exec(chat, ['echo', 'x'])).stdout.toString(), 'x\n')
  t.equal(execs.filter(a => a.startsWith(AGENT_ARGV[0] as string)).length, 1, 'the agent was tried once, then never again')
})
