import type { EngineNetwork, SandboxEngine } from '../sandbox/types.js'
import type { KubeClient } from './kube-client.js'
import { isConflict, isNotFound, KubeError } from './kube-error.js'
import { ROLE_LABEL, networkPolicyObject, noNetworkPolicyObject, selector, userLabels, validName, type Labels, type ListOf, type ObjectMeta } from './kube-objects.js'

/*
 * The isolated sandbox network as a NetworkPolicy (docs/engine.md#network): it selects the pods
 * labelled with the network's name, lets nothing in but the server's pods, and nothing out but DNS
 * and the server (restrictToProxy: only the egress proxy's port). A policy needs a CNI that enforces
 * it (Calico, Cilium, …); the server's pods are named by KUBE_SERVER_SELECTOR, a server outside the
 * cluster by its address (KUBE_SERVER_ADDRESS, an IPv4 address).
 */

export interface ServerEndpoint {
  /** labels of the server's pods (in the sandboxes' namespace) */
  selector?: Labels
  /** the address sandboxes reach the server at (a Service's cluster IP or name, or a host's IP): the network's gateway */
  address?: string
}

interface Policy { metadata: ObjectMeta, spec?: { policyTypes?: string[], ingress?: unknown[], egress?: unknown[] } }

type NetworkCalls = Pick<SandboxEngine, 'ensureNetwork' | 'listNetworks' | 'removeNetwork' | 'restrictToProxy'> & { ensureNoNetwork: () => Promise<void> }

const PATH = 'networking.k8s.io/v1'

export function networkCalls (client: KubeClient, server: ServerEndpoint): NetworkCalls {
  const path = (name?: string): string => client.path('networkpolicies', name, undefined, PATH)
  let noNetwork: Promise<void> | undefined

  function answer (p: Policy, result: 'created' | 'exists'): EngineNetwork & { result: 'created' | 'exists' } {
    const types = p.spec?.policyTypes ?? []
    return {
      id: p.metadata.name,
      // Egress only to what the policy names; ingress from no other sandbox.
      internal: types.includes('Egress'),
      isolated: types.includes('Ingress'),
      isolationSetting: 'a NetworkPolicy with policyTypes Ingress and Egress',
      labels: userLabels(p.metadata.labels),
      gateway: server.address === undefined || server.address === '' ? null : server.address,
      // Sandboxes reach the server through its Service: its listeners bind on every address of its pod.
      listen: '0.0.0.0',
      subnet: null,
      result
    }
  }

  return {
    async ensureNetwork (name, labels) {
      if (!validName(name) || name.length > 63) throw new KubeError(`a sandbox network name must be a DNS-1123 label (it is a label value), got "${name.slice(0, 100)}"`)
      try {
        return answer(await client.request<Policy>('POST', path(), { body: networkPolicyObject(name, labels, server) }), 'created')
      } catch (err) {
        if (!isConflict(err)) throw err
      }
      return answer(await client.request<Policy>('GET', path(name)), 'exists')
    },

    async listNetworks (labelFilters) {
      const list = await client.request<ListOf<Policy>>('GET', path(), { query: { labelSelector: selector([`${ROLE_LABEL}=network`, ...labelFilters]) } })
      return list.items.map(p => ({ id: p.metadata.name, name: p.metadata.name }))
    },

    async removeNetwork (idOrName) {
      if (!validName(idOrName)) return
      try { await client.request('DELETE', path(idOrName)) } catch (err) { if (!isNotFound(err)) throw err }
    },

    async restrictToProxy (network, port) {
      let current: Policy
      try { current = await client.request<Policy>('GET', path(network)) } catch (err) {
        if (isNotFound(err)) throw (err as KubeError).as('network-missing', `no sandbox network ${network}`)
        throw err
      }
      const next = networkPolicyObject(network, userLabels(current.metadata.labels), server, port)
      await client.request('PUT', path(network), { body: { ...next, metadata: { ...(next.metadata as object), resourceVersion: current.metadata.resourceVersion } } })
      const warnings: string[] = []
      if ((server.selector === undefined || Object.keys(server.selector).length === 0) && !/^\d{1,3}(\.\d{1,3}){3}$/.test(server.address ?? '')) {
        warnings.push('neither KUBE_SERVER_SELECTOR nor an IPv4 KUBE_SERVER_ADDRESS names the server: sandboxes reach only DNS, not the egress proxy')
      }
      return { warnings }
    },

    async ensureNoNetwork () {
      noNetwork ??= (async () => {
        try { await client.request('POST', path(), { body: noNetworkPolicyObject() }) } catch (err) { if (!isConflict(err)) throw err }
      })().catch(err => { noNetwork = undefined; throw err })
      await noNetwork
    }
  }
}
