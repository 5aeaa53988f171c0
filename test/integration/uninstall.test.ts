/*
 * scripts/uninstall.sh against the real Docker engine: two servers' worth of objects (a chat sandbox,
 * a warm-pool sandbox, their home volumes, the sandbox network and its egress firewall chains) under
 * two test prefixes; the dry run removes nothing, --yes removes exactly one prefix's objects and
 * chains, and the other prefix's survive.
 */
import t from 'tap'
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import type { SandboxNetwork } from '../../plugins/sandbox/types.js'
import { applyFirewall, chainName, removeFirewall } from '../../plugins/sandbox-docker/docker-firewall.js'
import { bridgeOf, buildSandboxApp, cleanupPrefix, dockerOrSkip, testDockerClient } from './docker.js'

const SCRIPT = fileURLToPath(new URL('../../scripts/uninstall.sh', import.meta.url))
const gate = await dockerOrSkip()
const root = process.getuid?.() === 0

interface Run { code: number, out: string, err: string }
async function uninstall (...args: string[]): Promise<Run> {
  return await new Promise(resolve => {
    execFile('bash', [SCRIPT, ...args], { timeout: 120_000, env: { PATH: process.env.PATH ?? '', ...(process.env.DOCKER_HOST !== undefined && { DOCKER_HOST: process.env.DOCKER_HOST }) } },
      (err, out, errOut) => { resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, out, err: errOut }) })
  })
}

async function iptables (tool: string, ...args: string[]): Promise<boolean> {
  return await new Promise(resolve => { execFile(tool, ['-w', '5', ...args], err => { resolve(err === null) }) })
}

/** The prefix's objects as the engine lists them by label. */
async function objects (prefix: string): Promise<{ containers: string[], volumes: string[], networks: string[] }> {
  const client = testDockerClient()
  const filter = [`cu.prefix=${prefix}`]
  try {
    return {
      containers: (await client.list(filter)).map(c => c.name).sort(),
      volumes: (await client.listVolumes(filter)).map(v => v.name).sort(),
      networks: (await client.listNetworks(filter)).map(n => n.name).sort()
    }
  } finally { client.close() }
}

t.test('uninstall.sh removes one prefix\'s containers, volumes, network and firewall chains, and nothing else', gate, async t => {
  const victim = `un-${randomBytes(3).toString('hex')}`
  const bystander = `un-${randomBytes(3).toString('hex')}`
  const nets: Array<SandboxNetwork & { bridge: string }> = []
  for (const prefix of [victim, bystander]) await cleanupPrefix(t, prefix)
  t.teardown(async () => { for (const n of nets) await removeFirewall(n.bridge) })

  for (const prefix of [victim, bystander]) {
    // A chat sandbox and a warm-pool sandbox, created by the server's own code with its labels.
    const { app } = await buildSandboxApp(t, prefix, { poolSize: 1 })
    await app.sandbox.ensure('un-chat')
    const until = Date.now() + 120_000
    while ((app.sandbox.pooled?.() ?? 0) < 1 && Date.now() < until) await new Promise(resolve => setTimeout(resolve, 250))
    const net = app.sandbox.network?.()
    if (net == null) throw new Error('the sandbox network was not prepared')
    const bridge = await bridgeOf(net.name)
    nets.push({ ...net, bridge })
    if (root) t.same(await applyFirewall({ gateway: net.gateway, bridge }, 3128), { warnings: [] }, `${prefix}: egress firewall installed`)
    await app.close()
  }
  const [victimNet, bystanderNet] = nets as [SandboxNetwork & { bridge: string }, SandboxNetwork & { bridge: string }]
  const before = { victim: await objects(victim), bystander: await objects(bystander) }
  t.equal(before.victim.containers.length, 2, `chat and pool sandbox: ${before.victim.containers.join(', ')}`)
  t.equal(before.victim.volumes.length, 2, 'their home volumes')
  t.same(before.victim.networks, [`${victim}-sandboxes`])

  await t.test('the dry run lists everything and removes nothing', async t => {
    const run = await uninstall('--prefix', victim)
    t.equal(run.code, 0, run.err)
    t.match(run.out, /Dry run: nothing is removed/)
    for (const c of before.victim.containers) t.match(run.out, `would remove container ${c}`)
    for (const v of before.victim.volumes) t.match(run.out, `would remove volume ${v}`)
    t.match(run.out, `would remove network ${victim}-sandboxes`)
    if (root) t.match(run.out, `would remove iptables chain ${chainName(victimNet.bridge)}`)
    t.notMatch(run.out, bystander)
    t.same(await objects(victim), before.victim, 'everything is still there')
    if (root) t.ok(await iptables('iptables', '-S', chainName(victimNet.bridge)), 'the chain is still there')
  })

  await t.test('--yes removes the prefix\'s objects and chains; the other prefix keeps all of its own', async t => {
    const run = await uninstall('--prefix', victim, '--yes')
    t.equal(run.code, 0, `${run.out}\n${run.err}`)
    t.same(await objects(victim), { containers: [], volumes: [], networks: [] }, 'no container, volume or network of the prefix is left')
    t.same(await objects(bystander), before.bystander, 'the other prefix\'s objects are untouched')
    if (root) {
      for (const tool of ['iptables', 'ip6tables']) {
        t.notOk(await iptables(tool, '-S', chainName(victimNet.bridge)), `${tool}: the prefix's chain is gone`)
        t.notOk(await iptables(tool, '-C', 'INPUT', '-i', victimNet.bridge, '-j', chainName(victimNet.bridge)), `${tool}: and its INPUT jump`)
        t.ok(await iptables(tool, '-S', chainName(bystanderNet.bridge)), `${tool}: the other prefix's chain stays`)
        t.ok(await iptables(tool, '-C', 'INPUT', '-i', bystanderNet.bridge, '-j', chainName(bystanderNet.bridge)), `${tool}: with its jump`)
      }
    } else {
      t.comment('not root: the firewall chains were not checked')
    }
    const again = await uninstall('--prefix', victim, '--yes')
    t.equal(again.code, 0)
    t.match(again.out, `nothing labelled cu.prefix=${victim}`)
  })

  await t.test('--orphan-chains removes chains whose bridge is gone and keeps live ones', { skip: root ? false : 'needs root (iptables)' }, async t => {
    const gone = `gone${randomBytes(4).toString('hex')}`
    const chain = chainName(gone)
    t.teardown(async () => { await removeFirewall(gone) })
    for (const tool of ['iptables', 'ip6tables']) {
      t.ok(await iptables(tool, '-N', chain) && await iptables(tool, '-A', chain, '-j', 'REJECT') && await iptables(tool, '-I', 'INPUT', '-i', gone, '-j', chain), `${tool}: a chain left by a network that is gone`)
    }
    const dry = await uninstall('--prefix', victim, '--orphan-chains')
    t.equal(dry.code, 0, dry.err)
    t.match(dry.out, `would remove iptables chain ${chain}`)
    t.ok(await iptables('iptables', '-S', chain), 'the dry run left it')
    const run = await uninstall('--prefix', victim, '--orphan-chains', '--yes')
    t.equal(run.code, 0, `${run.out}\n${run.err}`)
    for (const tool of ['iptables', 'ip6tables']) {
      t.notOk(await iptables(tool, '-S', chain), `${tool}: the orphaned chain is gone`)
      t.notOk(await iptables(tool, '-C', 'INPUT', '-i', gone, '-j', chain), `${tool}: and its jump`)
      t.ok(await iptables(tool, '-S', chainName(bystanderNet.bridge)), `${tool}: a live network's chain stays`)
    }
  })

  await t.test('bad input is refused with a clear message and exit status 2', async t => {
    for (const args of [['--prefix', 'Bad Prefix!'], ['--prefix'], ['--network', '-x'], ['--what']]) {
      const run = await uninstall(...args)
      t.equal(run.code, 2, args.join(' '))
      t.match(run.err, /^uninstall: /)
    }
    t.same(await objects(bystander), before.bystander)
  })
})
