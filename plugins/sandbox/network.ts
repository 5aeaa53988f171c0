import type { EngineNetwork } from './engine-types.js'
import { SandboxSetupRefused } from './errors.js'
import { MANAGED_BY, networkLabels } from './names.js'
import { describe, type CoreBase } from './context.js'

/*
 * The sandbox network: internal (no route out: egress only through the policy proxy)
 * and isolated (sandboxes cannot reach each other). A network found by name is checked, never trusted:
 * one this server created (its labels) that lacks either property is replaced when nothing uses it;
 * anything else is refused with a message naming the network and what is wrong, and no sandbox is
 * started on it.
 */

/** What is unsafe about a network, in words for the operator (empty: safe). */
function flaws (net: EngineNetwork): string[] {
  return [
    ...(net.internal ? [] : ['it has a direct route out (it is not internal)']),
    ...(net.isolated ? [] : [`sandboxes on it can reach each other (${net.isolationSetting} is not set)`])
  ]
}

/** The sandbox network, prepared at boot (and again when it vanished); `current()` once it is ready. */
export interface SandboxNetwork {
  /** `legacy`: only for sandboxes found on it (egress over the agent socket): new sandboxes stay without a network */
  prepareNetwork: (o?: { legacy?: boolean }) => Promise<void>
  /** the internal sandbox network once bootstrap prepared it; null without one (fail closed: network none) */
  current: () => EngineNetwork | null
}

export function createNetwork (base: Pick<CoreBase, 'engine' | 'log' | 'opts' | 'settings' | 'networkName'>): SandboxNetwork {
  const { engine, log, opts } = base
  let network: EngineNetwork | null = null

  /**
   * Ensures the internal, isolated sandbox network (the egress plugin points new sandboxes' proxy
   * variables at its gateway). Throws SandboxSetupRefused when the network by that name is unsafe and cannot be replaced.
   */
  async function prepareNetwork (o: { legacy?: boolean } = {}): Promise<void> {
    const name = base.networkName
    const labels = networkLabels(opts.prefix)
    let net = await engine.ensureNetwork(name, labels)
    const found = flaws(net)
    if (found.length > 0) {
      const ours = net.labels['managed-by'] === MANAGED_BY && net.labels['cu.prefix'] === opts.prefix
      const unsafe = `sandbox network '${name}' is not safe to use: ${found.join(', and ')}`
      if (!ours) {
        throw new SandboxSetupRefused(`${unsafe}. It was not created by this server (labels managed-by=${MANAGED_BY}, cu.prefix=${opts.prefix}), so it is left as it is: remove it and the server creates an internal, isolated one, or set SANDBOX_NETWORK to another name`)
      }
      try {
        await engine.removeNetwork(name)
      } catch (err) {
        throw new SandboxSetupRefused(`${unsafe}. It is this server's but still in use (${describe(err)}): stop its sandboxes and remove it, and the server creates an internal, isolated one`)
      }
      net = await engine.ensureNetwork(name, labels)
      const still = flaws(net)
      if (still.length > 0) throw new SandboxSetupRefused(`sandbox network '${name}' was recreated but ${still.join(', and ')}`)
      log.warn({ network: name, was: found }, 'replaced an unsafe sandbox network of this server with an internal, isolated one')
    }
    if (net.gateway === null) {
      log.error({ network: name }, `sandbox network '${name}' reports no gateway: new sandboxes get no network`)
      network = null
      base.settings.networkMode = 'none'
      return
    }
    network = net
    if (o.legacy === true) {
      log.info({ network: name, gateway: net.gateway }, 'sandbox network kept for the sandboxes found on it; new sandboxes reach the egress proxy over their agent socket')
      return
    }
    base.settings.networkMode = name
    log.info({ network: name, result: net.result, gateway: net.gateway },
      `sandbox network ready (internal: no route out; isolated: ${net.isolationSetting})`)
  }

  return { prepareNetwork, current: () => network }
}
