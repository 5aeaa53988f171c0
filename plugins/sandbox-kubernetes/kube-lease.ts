import type { LeaseHolder, SandboxEngine } from '../sandbox/types.js'
import type { KubeClient } from './kube-client.js'
import { isConflict, isNotFound, KubeError } from './kube-error.js'
import { ROLE_LABEL, validName, type ConfigMap } from './kube-objects.js'

/*
 * Exclusive leases (an instance's SANDBOX_PREFIX, plugins/sandbox/prefix-lease.ts) as ConfigMaps: the
 * create is atomic (409 when the name is taken), the token is `<name>/<uid>` so renewals and the
 * break act on that very object (a renewal checks the uid and writes with the resourceVersion it
 * read; a break deletes with a uid precondition), never on a successor of the same name.
 */

type LeaseCalls = Pick<SandboxEngine, 'acquireLease' | 'renewLease' | 'breakLease'>

function parseToken (token: string): { name: string, uid: string } | undefined {
  const slash = token.indexOf('/')
  if (slash <= 0) return undefined
  return { name: token.slice(0, slash), uid: token.slice(slash + 1) }
}

export function leaseCalls (client: KubeClient): LeaseCalls {
  const path = (name?: string): string => client.path('configmaps', name)

  async function get (name: string): Promise<ConfigMap | undefined> {
    try { return await client.request<ConfigMap>('GET', path(name)) } catch (err) { if (isNotFound(err)) return undefined; throw err }
  }

  return {
    async acquireLease (name, holder, o) {
      if (!validName(name)) throw new KubeError(`a lease name must be a DNS-1123 subdomain, got "${name.slice(0, 100)}"`)
      const body: ConfigMap = {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name, labels: { ...o.labels, [ROLE_LABEL]: 'lease' } },
        data: { holder: JSON.stringify(holder), renewedAt: String(o.now) }
      }
      try {
        const made = await client.request<ConfigMap>('POST', path(), { body })
        return { acquired: true, token: `${name}/${made.metadata.uid ?? ''}` }
      } catch (err) {
        if (!isConflict(err)) throw err
      }
      const current = await get(name)
      if (current === undefined) return { acquired: false, current: null }
      if (current.metadata.labels?.[ROLE_LABEL] !== 'lease') throw new KubeError(`the ConfigMap ${name} exists and is not a lease of this server: remove it or choose another SANDBOX_PREFIX`, { reason: 'conflict', statusCode: 409 })
      let holderOf: LeaseHolder
      try { holderOf = JSON.parse(current.data?.holder ?? '') as LeaseHolder } catch { holderOf = { id: '', host: '', pid: 0, startedAt: '' } }
      return { acquired: false, current: { holder: holderOf, renewedAt: Number(current.data?.renewedAt ?? 0) || 0, token: `${name}/${current.metadata.uid ?? ''}` } }
    },

    async renewLease (token, at) {
      const t = parseToken(token)
      if (t === undefined) return false
      for (let attempt = 0; attempt < 3; attempt++) {
        const current = await get(t.name)
        if (current === undefined || current.metadata.uid !== t.uid) return false
        try {
          await client.request('PUT', path(t.name), { body: { ...current, apiVersion: 'v1', kind: 'ConfigMap', data: { ...current.data, renewedAt: String(at) } } })
          return true
        } catch (err) {
          if (isNotFound(err)) return false
          if (!isConflict(err)) throw err
        }
      }
      return false
    },

    async breakLease (token) {
      const t = parseToken(token)
      if (t === undefined) return
      try {
        await client.request('DELETE', path(t.name), { body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: t.uid } } })
      } catch (err) { if (!isNotFound(err) && !isConflict(err)) throw err }
    }
  }
}
