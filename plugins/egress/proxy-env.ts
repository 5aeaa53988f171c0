import type { EnvContributor, SandboxService } from '../sandbox/types.js'

/*
 * The proxy settings of every sandbox (docs/contract.md#egress, docs/engine.md#environment): the sandbox network
 * has no other way out, so the plugin contributes the variables every common tool reads to each sandbox's
 * own environment (sandbox.addEnvContributor). curl only reads lower-case http_proxy; npm, pip, git, apt
 * read these; ALL_PROXY is the same proxy's SOCKS5 side (socks5h: names resolved by the proxy), for tools
 * and protocols without an HTTP proxy setting.
 */

export const PROXY_VARS: readonly string[] = ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy', 'NO_PROXY', 'no_proxy', 'npm_config_proxy', 'npm_config_https_proxy', 'ALL_PROXY', 'all_proxy']

/** The variables for a proxy at `proxy` (http://host:port); none when there is no proxy. */
export function proxyEnv (proxy: string | null | undefined): Record<string, string> {
  if (proxy === null || proxy === undefined) return {}
  const env: Record<string, string> = {}
  for (const name of PROXY_VARS) {
    const lower = name.toLowerCase()
    env[name] = lower === 'no_proxy' ? 'localhost,127.0.0.1,::1' : lower === 'all_proxy' ? proxy.replace(/^http:/, 'socks5h:') : proxy
  }
  return env
}

/**
 * The contributor: with `overSocket`, the agent's relay on the sandbox's own loopback at `port`
 * (docs/network.md#egress-over-the-agent-socket); else the proxy at the sandbox network's gateway on `port`,
 * once the sandbox core prepared a network; nothing while sandboxes have none (ENABLE_NETWORK=false, no
 * gateway: fail closed).
 */
export function proxyEnvContributor (sandbox: Pick<SandboxService, 'network'>, port: number, overSocket = false): EnvContributor {
  return {
    names: PROXY_VARS,
    env: () => {
      if (overSocket) return proxyEnv(`http://127.0.0.1:${port}`)
      const net = sandbox.network?.() ?? null
      return net === null ? {} : proxyEnv(`http://${net.gateway}:${port}`)
    }
  }
}
