/*
 * The agent socket (docs/engine.md#the-agent-socket) on a real engine: with an image whose entrypoint starts
 * the agent (SOCKET_IMAGE, label cubicle.agent-socket=1), commands reach it through the socket the
 * engine listens on, with no exec at all (not even one to start the agent); the socket turned off, an
 * old image, or an agent that died, fall back to the agent over exec; a sandbox that kills its agent and poses as one
 * (fresh, or with a made-up key) is refused and sees no other chat's socket, whose chat keeps its own;
 * a restarted server lets the running agents back in (the key on the host), and warm pool sandboxes
 * use the socket once claimed.
 */
import { execFile } from 'node:child_process'
import { mkdtemp, readdir } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { createDockerEngine } from '../../plugins/sandbox-docker/docker-client.js'
import { AGENT_ARGV } from '../../plugins/sandbox/agent-client.js'
import type { ExecSpec, SandboxEngine } from '../../plugins/sandbox/engine-types.js'
import type { CoreSandboxService } from '../../plugins/sandbox/service.js'
import { buildSandboxApp, cleanupPrefix, DOCKER_HOST, dockerOrSkip } from './docker.js'

const PREFIX = 'tagentsock'
const SOCKET_IMAGE = process.env.SOCKET_IMAGE ?? process.env.DOCKER_IMAGE ?? 'computer-use-sandbox:latest'
/** An image built before the agent socket (none has the label: that subtest is skipped, the rest still runs). */
const OLD_IMAGE = process.env.OLD_IMAGE ?? 'computer-use-sandbox:agents'
const run = promisify(execFile)

/** The image's cubicle.agent-socket label ('' when absent or the image is missing). */
async function socketLabel (image: string): Promise<string> {
  try {
    return (await run('docker', ['image', 'inspect', '-f', '{{ index .Config.Labels "cubicle.agent-socket" }}', image])).stdout.trim()
  } catch { return '' }
}

async function gate (): Promise<string | false> {
  const { skip } = await dockerOrSkip()
  if (skip !== false) return skip
  if (await socketLabel(SOCKET_IMAGE) === '1') return false
  const reason = `${SOCKET_IMAGE} predates the agent socket (no label cubicle.agent-socket=1): rebuild it (npm run sandbox:build) or set SOCKET_IMAGE`
  if (process.env.REQUIRE_DOCKER === '1') throw new Error(`REQUIRE_DOCKER=1: ${reason}`)
  return reason
}
const skip = await gate()
const oldSkip = await socketLabel(OLD_IMAGE) === '' ? false : `${OLD_IMAGE} has the agent socket: set OLD_IMAGE to an image built before it`
const quiet = { warn: () => {}, debug: () => {} }

interface Counted { client: SandboxEngine, execs: Array<{ id: string, argv: string }> }

/** The socket-enabled engine, counting every exec the core asks of it. */
function counted (runDir: string): Counted {
  const real = createDockerEngine(DOCKER_HOST, {}, { runDir, runDirHost: runDir, log: quiet })
  const execs: Counted['execs'] = []
  const client: SandboxEngine = { ...real, exec: async (id: string, spec: ExecSpec) => { execs.push({ id, argv: spec.argv.join(' ') }); return await real.exec(id, spec) } }
  return { client, execs }
}

async function sh (service: CoreSandboxService, chat: string, command: string): Promise<string> {
  let out = ''
  const r = await service.runCommand(chat, command, { timeoutMs: 30_000, onOutput: s => { out += s } })
  return r.exitCode === 0 ? out : `${out}[exit ${String(r.exitCode)}]`
}

const isAgentExec = (argv: string): boolean => argv.startsWith(AGENT_ARGV[0] ?? '')

/** Run as assistant inside a sandbox: poses as an agent on the socket, answers what the engine said. */
const POSER = `
import os, socket, sys
res = {}
def attempt(mode, proof):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect('/run/cubicle-agent/agent.sock')
    except OSError as e:
        return 'connect errno %d' % e.errno
    try:
        greet = b''
        while len(greet) < 37:
            b = s.recv(37 - len(greet))
            if not b: return 'closed before greeting'
            greet += b
        s.sendall(mode + proof)
        reply = s.recv(33)
        return 'accepted' if reply[:1] in (b'K', b'O') else 'refused'
    except OSError:
        return 'refused'
    finally:
        s.close()
res['fresh'] = attempt(b'F', bytes(32))
res['resume'] = attempt(b'R', os.urandom(32))
for name, fn in (('unlink', lambda: os.unlink('/run/cubicle-agent/agent.sock')), ('plant', lambda: os.symlink('/tmp', '/run/cubicle-agent/x'))):
    try:
        fn(); res[name] = 'done'
    except OSError as e:
        res[name] = e.errno
res['listing'] = sorted(os.listdir('/run/cubicle-agent'))
print(res)
`

t.test('the agent socket (real Docker)', { skip }, async t => {
  await cleanupPrefix(t, PREFIX)
  const dataDir = await mkdtemp(join(tmpdir(), `${PREFIX}-data-`))
  const runDir = join(dataDir, 'run')
  let { client, execs } = counted(runDir)
  let { app, service } = await buildSandboxApp(t, PREFIX, { client, image: SOCKET_IMAGE, killGraceMs: 2000 }, dataDir)

  t.test('commands go over the socket: no exec, not even one to start the agent or probe readiness', async t => {
    const info = await service.ensure('s-a')
    t.same(execs.filter(e => e.id === info.sandboxId), [], 'the new sandbox was found ready by its agent (docs/contract.md#creation): no exec')
    t.equal(await sh(service, 's-a', 'echo hi'), 'hi\n')
    const ps = await sh(service, 's-a', 'ps -eo args | grep -c "[c]ubicle-agent.py --connect"')
    t.equal(ps, '1\n', 'the entrypoint started the agent in socket mode')
    execs.length = 0
    for (let i = 0; i < 5; i++) t.equal(await sh(service, 's-a', `echo $((${i} + 1))`), `${i + 1}\n`)
    const r = await service.exec('s-a', ['sh', '-c', 'echo out; echo err >&2; exit 3'])
    t.same([r.exitCode, r.stdout.toString(), r.stderr.toString()], [3, 'out\n', 'err\n'])
    t.same(execs, [], 'no exec for commands and collecting execs')
    t.same((await readdir(runDir)).length, 1, 'one run directory')
    t.ok(info.sandboxId !== '')
  })

  t.test('a sandbox posing as its agent is refused, cannot touch the socket and sees no other chat', async t => {
    await service.ensure('s-b')
    t.equal(await sh(service, 's-b', 'echo b'), 'b\n')
    // Kill chat A's agent (its own command dies with it), then pose as an agent.
    await sh(service, 's-a', 'pkill -f "[c]ubicle-agent.py --connect"; sleep 1')
    const poser = await service.exec('s-a', ['python3', '-c', POSER], { timeoutMs: 30_000 })
    const seen = poser.stdout.toString()
    t.match(seen, /'fresh': 'refused'/, 'a fresh agent is refused after the first exec')
    t.match(seen, /'resume': 'refused'/, 'a made-up key is refused')
    t.match(seen, /'unlink': 30/, 'the socket cannot be removed (read-only, EROFS)')
    t.match(seen, /'plant': 30/, 'nothing can be planted beside it')
    t.match(seen, /'listing': \['agent.sock'\]/, 'only its own socket is there')
    const replaced = await service.exec('s-a', ['sh', '-c', `timeout 5 ${AGENT_ARGV.join(' ')} --connect /run/cubicle-agent/agent.sock; echo rc=$?`], { timeoutMs: 30_000 })
    t.equal(replaced.stdout.toString(), 'rc=124\n', 'the genuine agent script started by the sandbox is never let in (it keeps retrying)')
    t.equal(await sh(service, 's-a', 'echo still'), 'still\n', 'chat A works on (the agent over exec)')
    t.ok(execs.some(e => isAgentExec(e.argv)), 'the fallback started the agent over exec')
    execs.length = 0
    t.equal(await sh(service, 's-b', 'echo b2'), 'b2\n')
    t.same(execs, [], 'chat B keeps its socket: no exec')
  })

  t.test('without the socket (SANDBOX_AGENT_SOCKET=false) the entrypoint starts no agent and the server execs one', async t => {
    const plain = createDockerEngine(DOCKER_HOST)
    const off: Counted = { client: { ...plain, exec: async (id: string, spec: ExecSpec) => { off.execs.push({ id, argv: spec.argv.join(' ') }); return await plain.exec(id, spec) } }, execs: [] }
    const o = await buildSandboxApp(t, `${PREFIX}f`, { client: off.client, image: SOCKET_IMAGE }, dataDir)
    t.teardown(async () => { await o.app.close(); await cleanupPrefix(t, `${PREFIX}f`) })
    await o.service.ensure('s-off')
    t.equal(await sh(o.service, 's-off', 'test -e /run/cubicle-agent && echo mounted || echo none; ps -eo args | grep -c "[c]ubicle-agent.py --connect"'), 'none\n0\n[exit 1]')
    t.equal(off.execs.filter(e => isAgentExec(e.argv)).length, 1, 'one agent exec')
  })

  t.test('an old image without the socket agent falls back to the agent over exec', { skip: oldSkip }, async t => {
    const old = await buildSandboxApp(t, `${PREFIX}o`, { client, image: OLD_IMAGE }, dataDir)
    t.teardown(async () => { await old.app.close(); await cleanupPrefix(t, `${PREFIX}o`) })
    execs.length = 0
    await old.service.ensure('s-old')
    t.equal(await sh(old.service, 's-old', 'echo old'), 'old\n')
    t.equal(execs.filter(e => isAgentExec(e.argv)).length, 1, 'one agent exec')
    t.equal(await sh(old.service, 's-old', 'test -e /run/cubicle-agent && echo mounted || echo none'), 'none\n', 'no socket mounted')
  })

  t.test('after a server restart the running agents come back through their sockets', async t => {
    await app.close()
    ;({ client, execs } = counted(runDir))
    ;({ app, service } = await buildSandboxApp(t, PREFIX, { client, image: SOCKET_IMAGE }, dataDir))
    t.equal(await sh(service, 's-b', 'echo back'), 'back\n')
    t.same(execs.filter(e => isAgentExec(e.argv)), [], 'no agent exec: the agent reconnected with its key')
    execs.length = 0
    t.equal(await sh(service, 's-b', 'echo again'), 'again\n')
    t.same(execs, [], 'no exec')
  })

  t.test('warm pool sandboxes use the socket once claimed', async t => {
    await app.close()
    ;({ client, execs } = counted(runDir))
    ;({ app, service } = await buildSandboxApp(t, PREFIX, { client, image: SOCKET_IMAGE, poolSize: 1 }, dataDir))
    const t0 = Date.now()
    while (service.pooled() < 1 && Date.now() - t0 < 60_000) await new Promise(resolve => setTimeout(resolve, 200))
    t.equal(service.pooled(), 1, 'the pool filled')
    const info = await service.ensure('s-pool')
    execs.length = 0
    t.equal(await sh(service, 's-pool', 'echo pooled'), 'pooled\n')
    t.same(execs.filter(e => e.id === info.sandboxId), [], 'the claimed sandbox answers over its socket')
  })
})
