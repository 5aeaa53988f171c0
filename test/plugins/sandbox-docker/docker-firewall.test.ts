/*
 * The host side of the sandbox network's "no route out" (plugins/sandbox-docker/docker-firewall.ts, the
 * Docker engine's restrictToProxy): which rules are installed, and that a server that cannot install
 * them says so in its log (the egress plugin, SECURITY.md, operator step "Egress"). iptables and ip6tables are replaced by recording scripts on PATH, so the host's
 * real rules are never touched; the rules' effect on a real sandbox is egress-sandbox.test.ts's.
 */
import t from 'tap'
import type { Test } from 'tap'
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyBaseLogger } from 'fastify'
import { applyFirewall, chainName } from '../../../plugins/sandbox-docker/docker-firewall.js'
import { createEgressService } from '../../../plugins/egress/service.js'
import { OPTS } from '../egress/harness.js'

const NET = { gateway: '172.30.0.1', bridge: 'br-0123456789ab' }

/**
 * A PATH whose iptables/ip6tables append their argv to a file and exit with the given codes; a call whose
 * arguments contain `failOn` fails (exit 1) without being recorded.
 */
function fakeTables (t: Test, codes: { iptables: number, ip6tables: number }, failOn?: string): () => string[] {
  const dir = mkdtempSync(join(tmpdir(), 'cubicle-fw-'))
  const record = join(dir, 'calls')
  writeFileSync(record, '')
  for (const [cmd, code] of Object.entries(codes)) {
    const script = join(dir, cmd)
    // -C (does the jump exist?) answers no, so the jump is inserted as on a fresh host.
    const fail = failOn === undefined ? '' : `case " $* " in *"${failOn}"*) echo "${cmd}: No chain/target/match by that name." >&2; exit 1;; esac\n`
    writeFileSync(script, `#!/bin/sh\n${fail}echo "${cmd} $*" >> "${record}"\ncase " $* " in *" -C "*) exit 1;; esac\n${code === 0 ? '' : 'echo "iptables v1.8.9: Permission denied (you must be root)" >&2\n'}exit ${code}\n`)
    chmodSync(script, 0o755)
  }
  const path = process.env.PATH
  process.env.PATH = `${dir}:${path ?? ''}`
  t.teardown(() => { process.env.PATH = path; rmSync(dir, { recursive: true, force: true }) })
  return () => readFileSync(record, 'utf8').trim().split('\n').filter(l => l !== '')
}

/** The rules of `chain` the recorded calls of `cmd` leave (-F, -A, -I with a position), in order. */
function chainRules (calls: string[], cmd: string, chain: string): string[] {
  let rules: string[] = []
  for (const call of calls) {
    const args = call.split(' ').slice(3) // "<cmd> -w 5"
    if (!call.startsWith(`${cmd} `) || args[1] !== chain) continue
    if (args[0] === '-F') rules = []
    if (args[0] === '-A') rules.push(args.slice(2).join(' '))
    if (args[0] === '-I') rules.splice(Number(args[2]) - 1, 0, args.slice(3).join(' '))
  }
  return rules
}

function recordingLog (): { log: FastifyBaseLogger, lines: Array<{ level: string, obj: unknown, msg: string }> } {
  const lines: Array<{ level: string, obj: unknown, msg: string }> = []
  const at = (level: string) => (obj: unknown, msg?: string) => { lines.push({ level, obj, msg: msg ?? '' }) }
  const log = { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug'), trace: at('trace'), fatal: at('fatal') }
  return { log: log as unknown as FastifyBaseLogger, lines }
}

t.test('the sandbox bridge may open connections to the host only on the proxy port, and answer the host\'s: accept those, reject the rest', async t => {
  const calls = fakeTables(t, { iptables: 0, ip6tables: 0 })
  t.same(await applyFirewall(NET, 3128), { warnings: [] }, 'applied, nothing to warn about')
  const chain = chainName(NET.bridge)
  t.match(chain, /^CU-EG-[0-9a-f]{12}$/)
  const v4 = calls().filter(c => c.startsWith('iptables '))
  t.same(chainRules(v4, 'iptables', chain), [
    '-p tcp -d 172.30.0.1 --dport 3128 -j ACCEPT',
    '-m conntrack --ctstate ESTABLISHED --ctdir REPLY -j ACCEPT',
    '-j REJECT'
  ], 'the proxy port on the gateway, then replies on connections the host opened (the direct route to an app) are accepted; everything else is rejected')
  t.ok(v4[1]?.startsWith(`iptables -w 5 -F ${chain}`), 'the chain is flushed first, so stale rules go')
  t.ok(v4.some(c => c === `iptables -w 5 -I INPUT -i ${NET.bridge} -j ${chain}`), 'traffic from the bridge to the host goes through the chain')
  const v6 = calls().filter(c => c.startsWith('ip6tables '))
  t.ok(v6.some(c => c === `ip6tables -w 5 -A ${chain} -j REJECT`) && !v6.some(c => c.includes('ACCEPT')), 'IPv6: everything rejected')
})

t.test('a rule that cannot be installed on a refresh leaves the chain rejecting, never emptied of its reject', async t => {
  const chain = chainName(NET.bridge)
  const proxyRefused = fakeTables(t, { iptables: 0, ip6tables: 0 }, '--dport')
  await t.rejects(applyFirewall(NET, 3128), { message: /No chain\/target\/match/ }, 'the proxy rule refused: the engine says why')
  t.same(chainRules(proxyRefused(), 'iptables', chain), ['-j REJECT'], 'the flushed chain still rejects')
  // The reply rule only serves the direct route to apps (which then takes the relay): a warning, the rest installed.
  const repliesRefused = fakeTables(t, { iptables: 0, ip6tables: 0 }, 'conntrack')
  const { warnings } = await applyFirewall(NET, 3128)
  t.match(warnings, [new RegExp(`reply rule not installed on ${NET.bridge} \\(apps take the relay.*No chain/target/match`)], 'the reply rule refused: a warning')
  t.same(chainRules(repliesRefused(), 'iptables', chain), ['-p tcp -d 172.30.0.1 --dport 3128 -j ACCEPT', '-j REJECT'], 'the proxy port, the reject')
  t.ok(repliesRefused().some(c => c === `iptables -w 5 -I INPUT -i ${NET.bridge} -j ${chain}`), 'the jump installed')
  t.same(chainRules(repliesRefused(), 'ip6tables', chain), ['-j REJECT'], 'IPv6 closed too')
})

t.test('rules that cannot be installed: the engine rejects with iptables\' reason; ip6tables alone refused is a warning', async t => {
  fakeTables(t, { iptables: 4, ip6tables: 4 })
  await t.rejects(applyFirewall(NET, 3128), { message: /iptables .*Permission denied/ })
  t.test('ip6tables only', async t => {
    fakeTables(t, { iptables: 0, ip6tables: 3 })
    const { warnings } = await applyFirewall(NET, 3128)
    t.match(warnings, [new RegExp(`ip6tables rules not installed on ${NET.bridge}`)])
  })
})

t.test('a server whose engine cannot restrict the network says so in its log, naming what stays open; a partial success is a warning', async t => {
  for (const [restrictEgress, level, msg] of [
    [async () => { throw new Error('iptables -w 5 -N CU-EG-0: Permission denied (you must be root)') }, 'error', /cannot install the egress firewall: sandboxes can reach host services on the network gateway; see docs\/network\.md/],
    [async () => ['ip6tables rules not installed on br-x'], 'warn', /egress firewall: partly installed/]
  ] as const) {
    const { log, lines } = recordingLog()
    const built = createEgressService({
      sandbox: { network: () => ({ name: 'test', gateway: '127.0.0.1', subnet: null }), address: async () => null, restrictEgress },
      log,
      firewall: true
    }, { ...OPTS, port: 0 })
    t.teardown(async () => { await built.close() })
    await built.attach('fw-chat')
    const found = lines.filter(l => l.level === level)
    t.equal(found.length, 1, `one ${level} line`)
    t.match(found[0]?.msg, msg)
    if (level === 'error') t.match(found[0]?.obj, { err: { message: /Permission denied/ } }, 'with the engine\'s own reason')
  }
})
