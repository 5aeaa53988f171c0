import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'

/*
 * The host side of "no route out": an internal Docker network has no route to the outside, but its
 * gateway is an address of the host, so every host service listening on all interfaces (this
 * server's own port, databases, the Docker API over TCP) would be one connect() away. These rules
 * let the sandbox network open connections to the host on exactly one port (the proxy), let through the
 * replies on connections the host opened (the server's direct route to an app, docs/features.md#the-direct-route:
 * conntrack's reply direction only, so no packet a sandbox starts a connection with ever matches it) and
 * reject the rest:
 *
 *   INPUT -i <bridge> -j CU-EG-<hash>
 *   CU-EG-<hash>: -p tcp -d <gateway> --dport <port> -j ACCEPT
 *                 -m conntrack --ctstate ESTABLISHED --ctdir REPLY -j ACCEPT
 *                 -j REJECT
 *
 * Applied with iptables/ip6tables when the server may (root on the Docker host) as the engine's
 * `restrictToProxy` (docs/engine.md#network); otherwise the operator's job (docs/network.md). The rules
 * stay when the server stops: sandboxes keep running and must stay closed.
 */

/** The sandbox network as the host's firewall sees it. */
export interface BridgeNetwork {
  /** the host's address on the network */
  gateway: string
  /** the host interface of the network */
  bridge: string
}

const run = async (cmd: string, args: string[]): Promise<void> => await new Promise((resolve, reject) => {
  execFile(cmd, ['-w', '5', ...args], { timeout: 15_000 }, (err, _out, stderr) => {
    if (err === null) resolve()
    else reject(Object.assign(err, { message: `${cmd} ${args.join(' ')}: ${String(stderr).trim() || err.message}` }))
  })
})

export function chainName (bridge: string): string {
  return `CU-EG-${createHash('sha256').update(bridge).digest('hex').slice(0, 12)}`
}

/** Packets answering a connection the host opened into the network (never one a sandbox opens). */
export const REPLIES = ['-m', 'conntrack', '--ctstate', 'ESTABLISHED', '--ctdir', 'REPLY']

/** Installs one family's chain; the warnings: what is closed though it should not be (the reply rule refused). */
async function applyFamily (cmd: string, net: BridgeNetwork, port: number | null): Promise<string[]> {
  const warnings: string[] = []
  const chain = chainName(net.bridge)
  await run(cmd, ['-N', chain]).catch(() => {}) // exists
  await run(cmd, ['-F', chain])
  // The reject first, the accepts inserted before it: a step that fails (the xtables lock busy past -w, a
  // match this host lacks) leaves a chain that rejects, never one a refresh emptied of its reject.
  await run(cmd, ['-A', chain, '-j', 'REJECT'])
  if (port !== null) {
    await run(cmd, ['-I', chain, '1', '-p', 'tcp', '-d', net.gateway, '--dport', String(port), '-j', 'ACCEPT'])
    // Without it the replies are rejected: the direct route finds the addresses unreachable and apps take the relay.
    await run(cmd, ['-I', chain, '2', ...REPLIES, '-j', 'ACCEPT']).catch((err: Error) => {
      warnings.push(`reply rule not installed on ${net.bridge} (apps take the relay, not the direct route): ${err.message}`)
    })
  }
  const jump = ['INPUT', '-i', net.bridge, '-j', chain]
  await run(cmd, ['-C', ...jump]).catch(async () => { await run(cmd, ['-I', ...jump]) })
  return warnings
}

/**
 * Installs (or refreshes) the rules for the network. Rejects when iptables cannot be used here (the IPv4
 * rules are the ones that matter); an ip6tables failure, or a reply rule the host refused (no conntrack
 * match), is answered as a warning.
 */
export async function applyFirewall (net: BridgeNetwork, port: number): Promise<{ warnings: string[] }> {
  const warnings = await applyFamily('iptables', net, port)
  // No IPv6 on the sandbox network (containers also get disable_ipv6); close the link-local path anyway.
  try {
    await applyFamily('ip6tables', net, null)
    return { warnings }
  } catch (err) {
    return { warnings: [...warnings, `ip6tables rules not installed on ${net.bridge}: ${(err as Error).message}`] }
  }
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
