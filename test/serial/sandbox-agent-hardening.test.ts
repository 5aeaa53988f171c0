/*
 * The in-sandbox agent against a hostile sandbox, on a real engine. A process of the sandbox (as
 * assistant, the user every command runs as) can neither inspect the agent nor write frames in its
 * name: its interpreter and files are root's and read-only, the agent is non-dumpable from its first
 * instruction (a watcher waiting for it to start never gets its stdout), and ptrace is refused. And
 * should an agent lie anyway (played here by a fake agent the test puts in place as root): a frame for
 * an id the server never issued closes the stream at once, and a flood for a real id is read within
 * the stream's byte budget (SANDBOX_AGENT_MAX_BYTES_PER_SECOND), so the server's CPU stays small.
 */
import t from 'tap'
import type { ExecProcess, ExecSpec } from '../../plugins/sandbox/engine-types.js'
import { AGENT_ARGV, AGENT_BURST_SECONDS } from '../../plugins/sandbox/agent-client.js'
import { buildSandboxApp, cleanupPrefix, dockerOrSkip, wrapClient } from '../integration/docker.js'

const PREFIX = 'tagenthard'
const MiB = 1024 * 1024
/** the stream's byte budget in this test (the default) */
const RATE = 8 * MiB
/**
 * How long the fake agent below writes its frames: long enough that a server reading without the
 * budget, or reading on after a forged id, reads several times what these tests allow (before the
 * budget existed the server read 372 MiB of it in 10 s), short enough not to hold the serial tier.
 */
const FAKE_SECONDS = 6
const { skip } = await dockerOrSkip()

/** Run as assistant: what it can do to the agent (pid argv[1]) and to the agent's files. */
const PROBE = `
import ctypes, json, os, sys
pid = int(sys.argv[1])
res = {'uid': os.getuid()}
def attempt(path, flags):
    try:
        os.close(os.open(path, flags))
        return 'opened'
    except OSError as e:
        return e.errno
res['mem'] = attempt('/proc/%d/mem' % pid, os.O_RDONLY)
res['stdout'] = attempt('/proc/%d/fd/1' % pid, os.O_WRONLY)
res['environ'] = attempt('/proc/%d/environ' % pid, os.O_RDONLY)
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
    res['ptrace'] = 'attached'
    libc.ptrace(17, pid, None, None)
else:
    res['ptrace'] = ctypes.get_errno()
files = {}
for p in sys.argv[2:]:
    st = os.stat(p)
    files[p] = {'uid': st.st_uid, 'mode': oct(st.st_mode & 0o7777), 'writable': os.access(p, os.W_OK)}
res['files'] = files
res['interpreter_readable'] = os.access('/usr/lib/cubicle-agent/python3', os.R_OK)
print(json.dumps(res))
`

/**
 * Run as assistant in the background: waits for agents to start (a python3 whose script is
 * cubicle-agent.py, whatever the interpreter's path, started by the engine: parent pid 0) and tries, for 300 ms from the moment each
 * appears, to open its stdout (the way to write frames in its name). Writes what it saw to
 * /tmp/watch.json after each agent.
 */
const WATCHER = `
import json, os, struct, sys, time
deadline = time.time() + float(sys.argv[1])
done, agents, caught = set(), [], []
forged = struct.pack('>IIB', 9, 0x7ffffff0, 2) + b'evil'
while time.time() < deadline:
    for d in os.listdir('/proc'):
        if not d.isdigit() or d in done:
            continue
        try:
            with open('/proc/%s/cmdline' % d, 'rb') as f:
                cmd = f.read()
        except OSError:
            continue
        argv = cmd.split(b'\\0')
        if len(argv) < 2 or not argv[0].endswith(b'python3') or not argv[-2].endswith(b'cubicle-agent.py'):
            continue
        try:
            with open('/proc/%s/stat' % d) as f:
                ppid = f.read().rsplit(')', 1)[1].split()[1]
        except (OSError, IndexError):
            continue
        if ppid != '0':
            continue  # a command the agent forked, before its exec: not the agent
        done.add(d)
        agents.append(d)
        until = time.time() + 0.3
        while time.time() < until:
            try:
                fd = os.open('/proc/%s/fd/1' % d, os.O_WRONLY)
            except OSError:
                continue
            os.write(fd, forged)
            os.close(fd)
            caught.append(d)
            break
        with open('/tmp/watch.json', 'w') as f:
            json.dump({'agents': agents, 'caught': caught}, f)
    time.sleep(0.001)
`

/**
 * A fake agent (stands in for an agent that lies): hello, then it answers FAIL (could not spawn: the
 * server uses docker exec for that call) to every request but the one whose command names
 * `fake-target`, and for that one writes OUT frames of 256 KiB for FAKE_SECONDS, for its id (MODE flood) or for
 * an id never issued (MODE forged), then EXIT, and FAIL again to what follows. Writes what it sent
 * to /tmp/fake-sent.
 */
const fakeAgent = (mode: 'flood' | 'forged'): string => `
import json, os, struct, sys, time
def frame(rid, typ, payload=b''):
    return struct.pack('>IIB', len(payload) + 5, rid, typ) + payload
def jframe(rid, typ, obj):
    b = json.dumps(obj).encode()
    return frame(rid, typ, struct.pack('>I', len(b)) + b)
def write(b):
    view = memoryview(b)
    while view:
        view = view[os.write(1, view):]
inp = sys.stdin.buffer
write(jframe(0, 1, {'v': 1}))
while True:
    head = inp.read(9)
    if len(head) < 9:
        sys.exit(0)
    n, rid, typ = struct.unpack('>IIB', head)
    payload = inp.read(n - 5)
    if typ == 16 and b'fake-target' in payload:
        break
    if typ == 16:
        write(jframe(rid, 5, {'errno': 11, 'error': 'not now'}))
one = frame(rid if '${mode}' == 'flood' else 0x7ffffff0, 2, b'x' * 262144)
sent, t0 = 0, time.time()
try:
    while time.time() - t0 < ${FAKE_SECONDS}:
        write(one)
        sent += len(one)
    write(jframe(rid, 4, {'code': 0}))
except OSError:
    pass
with open('/tmp/fake-sent', 'w') as f:
    f.write('sent %.1f MiB in %.1f s' % (sent / 1048576, time.time() - t0))
while True:
    head = inp.read(9)
    if len(head) < 9:
        sys.exit(0)
    n, rid, typ = struct.unpack('>IIB', head)
    inp.read(n - 5)
    if typ == 16:
        write(jframe(rid, 5, {'errno': 11, 'error': 'not now'}))
`

t.test('the in-sandbox agent against a hostile sandbox (real Docker)', { skip }, async t => {
  await cleanupPrefix(t, PREFIX)
  const execs: string[] = []
  let agentBytes = 0
  const client = wrapClient(real => ({
    exec: async (id: string, spec: ExecSpec): Promise<ExecProcess> => {
      const argv = spec.argv.join(' ')
      execs.push(argv.slice(0, 80))
      const proc = await real.exec(id, spec)
      // Counts what the server reads of the agent's stdout (after the engine's framing).
      if (argv === AGENT_ARGV.join(' ')) proc.stdout.on('data', (data: Buffer) => { agentBytes += data.length })
      return proc
    }
  }))
  const { app } = await buildSandboxApp(t, PREFIX, { killGraceMs: 2000, client, agent: true, agentBytesPerSecond: RATE })
  const sandbox = app.sandbox
  const agentStarts = (): number => execs.filter(a => a === AGENT_ARGV.join(' ')).length
  // Each part has its own chat (its own agent and backoff); only the part's chat makes calls.
  let chat = 'hostile-1'
  const sh = async (command: string, timeoutMs = 30_000): Promise<{ out: string, exitCode: number | null }> => {
    let out = ''
    const r = await sandbox.runCommand(chat, command, { timeoutMs, onOutput: s => { out += s } })
    return { out, exitCode: r.exitCode }
  }
  /** Kills the agent as assistant and waits until the server started a new one (after the backoff). */
  const restartAgent = async (): Promise<void> => {
    const before = agentStarts()
    await sandbox.exec(chat, ['pkill', '-f', 'cubicle-agent.py'])
    for (let i = 0; i < 80 && agentStarts() === before; i++) {
      await new Promise(resolve => setTimeout(resolve, 250))
      await sh('true')
    }
    await new Promise(resolve => setTimeout(resolve, 500))
  }
  await sandbox.ensure(chat)
  await sh('true')

  t.test('assistant can neither inspect, ptrace nor replace the agent', async t => {
    const pid = (await sh('pgrep -f "^/usr/lib/cubicle-agent/python3 -I -S /opt/cubicle-agent/cubicle-agent.py"')).out.trim()
    t.match(pid, /^\d+$/, `the agent runs with the hardened command line (pid ${pid})`)
    const paths = ['/usr/lib/cubicle-agent', '/usr/lib/cubicle-agent/python3', '/opt/cubicle-agent', '/opt/cubicle-agent/cubicle-agent.py', '/opt/cubicle-agent/cubicle_files.py']
    const r = await sandbox.exec(chat, ['python3', '-', pid, ...paths], { stdin: PROBE })
    const res = JSON.parse(r.stdout.toString()) as Record<string, unknown> & { files: Record<string, { uid: number, mode: string, writable: boolean }> }
    t.equal(res.uid, 1000, 'the probe runs as assistant')
    t.equal(res.mem, 13, '/proc/<agent>/mem: EACCES')
    t.equal(res.stdout, 13, '/proc/<agent>/fd/1 (its stdout, the way to write frames in its name): EACCES')
    t.equal(res.environ, 13, '/proc/<agent>/environ: EACCES')
    t.equal(res.ptrace, 1, 'PTRACE_ATTACH: EPERM')
    for (const p of paths) t.same([res.files[p]?.uid, res.files[p]?.writable], [0, false], `${p} is root's and not writable (${res.files[p]?.mode})`)
    t.equal(res.files['/usr/lib/cubicle-agent/python3']?.mode, '0o711', 'the interpreter: execute only')
    t.equal(res.interpreter_readable, false, 'so the kernel starts the agent non-dumpable')
  })

  t.test('a watcher waiting for the agent to start never gets its stdout, over three restarts', async t => {
    await sandbox.exec(chat, ['sh', '-c', 'cat > /tmp/w.py'], { stdin: WATCHER })
    await sh('rm -f /tmp/watch.json; (python3 /tmp/w.py 40 </dev/null >/dev/null 2>&1 &)')
    await new Promise(resolve => setTimeout(resolve, 500))
    for (let i = 0; i < 3; i++) await restartAgent()
    const raw = (await sandbox.exec(chat, ['cat', '/tmp/watch.json'])).stdout.toString()
    t.comment(`watcher: ${JSON.stringify(raw)}`)
    const seen = JSON.parse(raw) as { agents: string[], caught: string[] }
    await sh('pkill -f /tmp/w.py; true')
    t.ok(seen.agents.length >= 3, `the watcher saw ${seen.agents.length} agents start`)
    t.same(seen.caught, [], 'and opened the stdout of none')
    t.equal((await sh('echo still')).out, 'still\n', 'the chat works')
  })

  async function withFake (mode: 'flood' | 'forged'): Promise<{ bytes: number, cpuMs: number, wallMs: number, sent: string, result: { exitCode: number | null, stdout: number } }> {
    chat = `hostile-${mode}`
    await sandbox.ensure(chat)
    const real = await sandbox.exec(chat, ['cat', '/opt/cubicle-agent/cubicle-agent.py'])
    if (real.exitCode !== 0) throw new Error('could not read the real agent')
    await sandbox.putFile(chat, '/opt/cubicle-agent/cubicle-agent.py', fakeAgent(mode), { mode: 0o644 })
    await restartAgent()
    agentBytes = 0
    const cpu0 = process.cpuUsage()
    const t0 = performance.now()
    const r = await sandbox.exec(chat, ['echo', 'fake-target'], { maxBytes: 1000, timeoutMs: 20_000 })
    await new Promise(resolve => setTimeout(resolve, Math.max(0, FAKE_SECONDS * 1000 + 500 - (performance.now() - t0))))
    const cpu = process.cpuUsage(cpu0)
    const wallMs = performance.now() - t0
    const bytes = agentBytes
    await sandbox.putFile(chat, '/opt/cubicle-agent/cubicle-agent.py', real.stdout, { mode: 0o644 })
    const sent = (await sh('cat /tmp/fake-sent 2>/dev/null || echo nothing')).out.trim()
    return { bytes, cpuMs: (cpu.user + cpu.system) / 1000, wallMs, sent, result: { exitCode: r.exitCode, stdout: r.stdout.length } }
  }

  t.test('an agent that lies: a frame for an id never issued closes the stream at once', async t => {
    const m = await withFake('forged')
    t.comment(`forged: server read ${(m.bytes / MiB).toFixed(1)} MiB, CPU ${m.cpuMs.toFixed(0)} ms in ${(m.wallMs / 1000).toFixed(1)} s; fake agent: ${m.sent}`)
    t.equal(m.result.exitCode, null, 'the call in flight ends as lost')
    t.equal(m.result.stdout, 0)
    t.ok(m.bytes < 4 * MiB, `the server read ${(m.bytes / MiB).toFixed(2)} MiB of forged frames, not hundreds`)
    t.ok(m.cpuMs < 1000, `server CPU over the ${FAKE_SECONDS} s: ${m.cpuMs.toFixed(0)} ms`)
    t.equal((await sh('echo after')).out, 'after\n', 'the next call works (docker exec)')
  })

  t.test('an agent that floods a real id is read within the byte budget', async t => {
    const m = await withFake('flood')
    const budget = RATE * (AGENT_BURST_SECONDS + m.wallMs / 1000)
    t.comment(`flood: server read ${(m.bytes / MiB).toFixed(1)} MiB, CPU ${m.cpuMs.toFixed(0)} ms in ${(m.wallMs / 1000).toFixed(1)} s; fake agent: ${m.sent}`)
    t.ok(m.bytes <= budget + MiB, `read ${(m.bytes / MiB).toFixed(1)} MiB, budget ${(budget / MiB).toFixed(1)} MiB`)
    t.ok(m.bytes >= 0.5 * RATE * FAKE_SECONDS, 'and about the rate: the stream was slowed, not stopped')
    t.same(m.result, { exitCode: 0, stdout: 1000 }, 'the call got its EXIT (output capped by maxBytes)')
    // The bytes above are the bound that holds. CPU follows them (0.5-1.1 s measured on a shared
    // machine, 1.8 s for 372 MiB before the budget) but is this whole test process's, and a full run on
    // 2 busy cores measured 2.3 s once: this is only a sanity bound against a runaway read loop.
    t.ok(m.cpuMs < 6000, `server CPU over the ${FAKE_SECONDS} s: ${m.cpuMs.toFixed(0)} ms`)
    t.equal((await sh('echo after')).out, 'after\n', 'the next call works')
  })

  t.test('a sandbox without the hardened interpreter: docker exec for good, never a weaker agent', async t => {
    // An image from before the interpreter existed. The engine answers the exec with its own error
    // text in place of output; that is no agent, not a failure to retry.
    chat = 'hostile-old'
    await sandbox.ensure(chat)
    await sh('true')
    await sandbox.exec(chat, ['rm', '/usr/lib/cubicle-agent/python3'], { user: 'root' })
    const before = agentStarts()
    await sandbox.exec(chat, ['pkill', '-f', 'cubicle-agent.py'])
    for (let i = 0; i < 8; i++) {
      t.equal((await sh(`echo ${i}`)).out, `${i}\n`)
      await new Promise(resolve => setTimeout(resolve, 500))
    }
    t.equal(agentStarts() - before, 1, 'tried once, then never again (no retry after a backoff)')
    t.same(execs.filter(a => a.startsWith('python3')), [], 'never python3 from PATH instead')
  })
})
