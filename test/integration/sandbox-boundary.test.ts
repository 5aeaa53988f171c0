/*
 * The sandbox boundary of a running sandbox, as the engine holds it and as code inside sees it
 * (SECURITY.md "The sandbox boundary"): a CPU quota, no published port, no Docker socket, an internal
 * network without inter-container traffic, and the sandbox's own services (the browser's CDP port,
 * tmux) reachable on loopback only, so nothing on the sandbox network can talk to them. Traffic stays
 * inside the sandbox this test creates.
 */
import t from 'tap'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { chatKey } from '../../core/chat-id.js'
import { buildSandboxApp, cleanupPrefix, dockerOrSkip } from './docker.js'

const run = promisify(execFile)
const PREFIX = 'tbound'
const CHAT = 'bound-a'
const { skip } = await dockerOrSkip()

interface Inspected {
  HostConfig: { NanoCpus: number, PortBindings: Record<string, unknown> | null, PublishAllPorts: boolean, Binds: string[] | null }
  NetworkSettings: { Ports: Record<string, unknown[] | null> | null }
  Mounts: Array<{ Source: string, Destination: string }>
  Config: { Env: string[], ExposedPorts?: Record<string, unknown> }
}

/** Listening TCP sockets of /proc/net/tcp{,6} as "address:port" (addresses in their kernel hex form decoded). */
function listeners (table: string, v6: boolean): string[] {
  const out: string[] = []
  for (const line of table.split('\n').slice(1)) {
    const [, local, , state] = line.trim().split(/\s+/)
    if (state !== '0A' || local === undefined) continue
    const [hex = '', portHex = ''] = local.split(':')
    const port = parseInt(portHex, 16)
    if (!v6) {
      out.push(`${[3, 2, 1, 0].map(i => parseInt(hex.slice(i * 2, i * 2 + 2), 16)).join('.')}:${port}`)
    } else {
      // Four 32-bit words, each in host (little-endian) byte order.
      const bytes = [0, 1, 2, 3].flatMap(w => [3, 2, 1, 0].map(b => hex.slice(w * 8 + b * 2, w * 8 + b * 2 + 2)))
      const groups = [0, 1, 2, 3, 4, 5, 6, 7].map(g => `${bytes[g * 2] ?? ''}${bytes[g * 2 + 1] ?? ''}`.replace(/^0{1,3}/, ''))
      out.push(`[${groups.join(':')}]:${port}`)
    }
  }
  return out
}

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|\[0:0:0:0:0:0:0:1\]|\[0:0:0:0:0:ffff:7f[0-9a-f]{2}:[0-9a-f]+\]):\d+$/

t.test('the boundary of a running sandbox (real Docker)', { skip }, async t => {
  await cleanupPrefix(t, PREFIX)
  const { app } = await buildSandboxApp(t, PREFIX, { cpuLimit: 1.5, memLimit: 1024 * 1024 * 1024 })
  await app.sandbox.ensure(CHAT)
  const sh = async (script: string, timeoutMs = 30_000): Promise<{ out: string, code: number | null }> => {
    const r = await app.sandbox.exec(CHAT, ['bash', '-c', script], { timeoutMs })
    return { out: r.stdout.toString() + r.stderr.toString(), code: r.exitCode }
  }
  const container = `${PREFIX}-sbx-${chatKey(CHAT)}`
  const inspected = (JSON.parse((await run('docker', ['inspect', container])).stdout) as Inspected[])[0] as Inspected

  t.test('a CPU quota: the engine holds it and the sandbox\'s cgroup enforces it', async t => {
    t.equal(inspected.HostConfig.NanoCpus, 1_500_000_000, 'CONTAINER_CPU_LIMIT 1.5 as NanoCpus')
    // cgroup v2: "<quota> <period>"; v1: two files.
    const max = (await sh('cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo "$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)"')).out.trim()
    const [quota, period] = max.split(/\s+/).map(Number)
    t.ok(quota !== undefined && period !== undefined && quota > 0, `a quota is set (${max})`)
    t.equal((quota ?? 0) / (period ?? 1), 1.5, 'one and a half CPUs per period')
  })

  t.test('no published port and no Docker socket, outside or inside', async t => {
    t.same(Object.keys(inspected.HostConfig.PortBindings ?? {}), [], 'no port bindings')
    t.equal(inspected.HostConfig.PublishAllPorts, false)
    t.same(Object.values(inspected.NetworkSettings.Ports ?? {}).filter(v => v !== null), [], 'no port bound on the host')
    t.same(inspected.HostConfig.Binds ?? [], [], 'no bind in the legacy form')
    t.same(inspected.Mounts.map(m => m.Destination).sort(), ['/home/assistant', '/mnt/user-data/outputs', '/mnt/user-data/uploads'], 'only the chat\'s three mounts')
    t.notOk(inspected.Mounts.some(m => /docker\.sock|\.sock$/.test(m.Source)), 'no socket is mounted')
    t.notOk(inspected.Config.Env.some(e => e.startsWith('DOCKER_HOST=')), 'no DOCKER_HOST')
    // Every unix socket the sandbox can see is asked for the Docker API's ping.
    const probe = await sh(`n=0; for s in $(find / -xdev -type s 2>/dev/null) /var/run/docker.sock /run/docker.sock; do
      [ -S "$s" ] || continue; n=$((n+1))
      if curl -s -m 2 --unix-socket "$s" http://docker/_ping | grep -qx OK; then echo "docker api at $s"; fi
    done; echo "sockets: $n"`, 60_000)
    t.notMatch(probe.out, /docker api at/, 'no socket inside answers the Docker API')
    t.match(probe.out, /sockets: \d+/)
    t.equal((await sh('test -e /var/run/docker.sock || test -e /run/docker.sock; echo $?')).out.trim(), '1', 'no docker.sock path')
  })

  t.test('its network is internal, with inter-container traffic off and no IPv6', async t => {
    const net = app.sandbox.network?.()
    t.ok(net, 'the sandbox network is prepared')
    const network = (JSON.parse((await run('docker', ['network', 'inspect', net?.name ?? ''])).stdout) as Array<{ Internal: boolean, Options: Record<string, string> }>)[0]
    // The sandbox still has a default route to the gateway; Docker drops what an internal network forwards.
    t.equal(network?.Internal, true, 'Docker forwards nothing out of it')
    t.equal(network?.Options['com.docker.network.bridge.enable_icc'], 'false', 'sandboxes cannot talk to each other')
    t.equal((await sh('cat /proc/sys/net/ipv6/conf/all/disable_ipv6')).out.trim(), '1', 'no IPv6 either')
  })

  t.test('the browser\'s CDP port and tmux are reachable on loopback only', async t => {
    const started = await sh('browser start >/dev/null 2>&1; tmux -u new-session -d -s main; curl -s -m 5 http://127.0.0.1:9222/json/version', 120_000)
    t.match(started.out, /"Browser"/, 'the browser answers CDP on 127.0.0.1 (positive control)')
    const socket = (await sh('stat -c "%F %a %U" "/tmp/tmux-$(id -u)/default"')).out.trim()
    t.match(socket, /^socket [67][67]0 assistant$/, `tmux listens on a unix socket of the sandbox user, closed to others (${socket})`)
    const tables = await sh('cat /proc/net/tcp; echo ===; cat /proc/net/tcp6 2>/dev/null')
    const [v4 = '', v6 = ''] = tables.out.split('===\n')
    const all = [...listeners(v4, false), ...listeners(v6, true)]
    t.ok(all.some(l => l.endsWith(':9222')), `the CDP port is among the listeners (${all.join(', ')})`)
    t.same(all.filter(l => !LOOPBACK.test(l)), [], 'every listening socket is on loopback')
    const ip = (await sh('hostname -i')).out.trim().split(/\s+/)[0] ?? ''
    t.match(ip, /^\d+\.\d+\.\d+\.\d+$/)
    const direct = await sh(`curl -s -m 5 -o /dev/null -w '%{http_code}' http://${ip}:9222/json/version; echo " exit=$?"`)
    t.equal(direct.out.trim(), '000 exit=7', `the sandbox's network address ${ip} refuses the CDP port`)
  })
})
