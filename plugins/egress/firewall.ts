import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import type { SandboxNetwork } from '../sandbox/types.js'

/*
 * The host side of "no route out": an internal Docker network has no route to the outside, but its
 * gateway is an address of the host, so every host service listening on all interfaces (this
 * server's own port, databases, the Docker API over TCP) would be one connect() away. These rules
 * let the sandbox network reach the host on exactly one port (the proxy) and reject the rest:
 *
 *   INPUT -i <bridge> -j CU-EG-<hash>
 *   CU-EG-<hash>: -p tcp -d <gateway> --dport <port> -j ACCEPT; -j REJECT
 *
 * Applied with iptables/ip6tables when the server may (root on the Docker host); otherwise the
 * operator's job (docs/network.md). The rules stay when the server stops: sandboxes keep running
 * and must stay closed.
 */

export type FirewallResult = 'applied' | 'unavailable'

const run = async (cmd: string, args: string[]): Promise<void> => await new Promise((resolve, reject) => {
  execFile(cmd, ['-w', '5', ...args], { timeout: 15_000 }, (err, _out, stderr) => {
    if (err === null) resolve()
    else reject(Object.assign(err, { message: `${cmd} ${args.join(' ')}: ${String(stderr).trim() || err.message}` }))
  })
})

export function chainName (bridge: string): string {
  return `CU-EG-${createHash('sha256').update(bridge).digest('hex').slice(0, 12)}`
}

async function applyFamily (cmd: string, net: SandboxNetwork, port: number | null): Promise<void> {
  const chain = chainName(net.bridge)
  await run(cmd, ['-N', chain]).catch(() => {}) // exists
  await run(cmd, ['-F', chain])
  if (port !== null) await run(cmd, ['-A', chain, '-p', 'tcp', '-d', net.gateway, '--dport', String(port), '-j', 'ACCEPT'])
  await run(cmd, ['-A', chain, '-j', 'REJECT'])
  const jump = ['INPUT', '-i', net.bridge, '-j', chain]
  await run(cmd, ['-C', ...jump]).catch(async () => { await run(cmd, ['-I', ...jump]) })
}

/** Installs (or refreshes) the rules for the network; 'unavailable' when iptables cannot be used here. */
export async function applyFirewall (net: SandboxNetwork, port: number, log: FastifyBaseLogger): Promise<FirewallResult> {
  try {
    await applyFamily('iptables', net, port)
  } catch (err) {
    log.error({ err, bridge: net.bridge },
      'cannot install the egress firewall (iptables): sandboxes can reach host services on the network gateway; see docs/network.md')
    return 'unavailable'
  }
  // No IPv6 on the sandbox network (containers also get disable_ipv6); close the link-local path anyway.
  await applyFamily('ip6tables', net, null).catch((err: unknown) => { log.warn({ err, bridge: net.bridge }, 'ip6tables rules not installed') })
  return 'applied'
}

/** Removes the rules of a bridge (tests and operators tearing a network down). */
export async function removeFirewall (bridge: string): Promise<void> {
  const chain = chainName(bridge)
  for (const cmd of ['iptables', 'ip6tables']) {
    await run(cmd, ['-D', 'INPUT', '-i', bridge, '-j', chain]).catch(() => {})
    await run(cmd, ['-F', chain]).catch(() => {})
    await run(cmd, ['-X', chain]).catch(() => {})
  }
}
