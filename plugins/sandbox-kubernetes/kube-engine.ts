import type { SandboxDetails, SandboxEngine, SandboxSummary } from '../sandbox/types.js'
import { KubeClient } from './kube-client.js'
import type { KubeConnection } from './kube-config.js'
import { isConflict, isNotFound, KubeError } from './kube-error.js'
import { inPodCalls } from './kube-in-pod.js'
import { leaseCalls } from './kube-lease.js'
import { lifecycleCalls } from './kube-lifecycle.js'
import { networkCalls, type ServerEndpoint } from './kube-network.js'
import { PAUSED_ANNOTATION, ROLE_LABEL, recordObject, selector, userLabels, validName, volumeObject, type ConfigMap, type Pod, type PodOptions } from './kube-objects.js'
import { deletePod, getPod, podOomKilled, podRunning } from './kube-pods.js'
import { newId, recordCalls, type Sandbox } from './kube-records.js'
import { claimMounts, storageSeen, type SharedStorage } from './kube-storage.js'
import { watchCalls } from './kube-watch.js'
import { giveOutputsDir } from '../../core/area-owner.js'

/*
 * The Kubernetes engine (docs/engine.md#kubernetes): the engine contract of plugins/sandbox/engine-types.ts
 * on any conformant cluster, with nothing but core objects. A sandbox is a record (a ConfigMap named by
 * the sandbox's name: its spec, id and labels) and, while it runs, a Pod named by its id; start creates
 * the pod and waits until it runs, stop deletes it (volumes, the record and so the sandbox stay). Claim
 * renames the record and relabels record and pod. This file wires the contract; the parts are by role:
 * the records (kube-records.ts), the pod's life: start, stop, pause (kube-lifecycle.ts), what runs in
 * the pod: exec, files, stats (kube-in-pod.ts), the watch of ended pods (kube-watch.ts).
 */

export interface KubeEngineOptions {
  connection: KubeConnection
  pod: PodOptions
  /** where sandboxes reach the server (its egress proxy) and which pods are the server's */
  server: ServerEndpoint
  /** the claim of the files the server keeps (chat data areas, skills): kube-storage.ts */
  shared?: SharedStorage
  /** the sandbox user the core names (`assistant`): every process runs as the pod's user */
  user?: string
  /** how long a start waits for the pod to run (image pulls included) */
  startTimeoutMs?: number
  /** pods brought up at once (KUBE_MAX_STARTING; kube-starts.ts); 0 = no bound */
  maxStarting?: number
}

export function createKubeEngine (o: KubeEngineOptions): SandboxEngine {
  const client = new KubeClient(o.connection)
  const user = o.user ?? 'assistant'
  const records = recordCalls(client)
  const { paused, parse, find, listAll } = records
  const inPod = inPodCalls({ client, records, user })
  const life = lifecycleCalls({ client, records, signalAll: inPod.signalAll, pod: o.pod, shared: o.shared, startTimeoutMs: o.startTimeoutMs ?? 300_000, maxStarting: o.maxStarting ?? 0 })
  const { podUids } = life
  const network = networkCalls(client, o.server)
  const leases = leaseCalls(client)
  let closed = false

  function details (s: Sandbox, pod: Pod | undefined): SandboxDetails {
    const running = podRunning(pod)
    const isPaused = running && paused.has(s.id)
    const ip = pod?.status?.podIP
    const network = s.spec.network
    return {
      id: s.id,
      name: s.record.metadata.name,
      running: running && !isPaused,
      paused: isPaused,
      labels: userLabels(s.record.metadata.labels),
      addresses: running && ip !== undefined && ip !== '' && network !== 'none' ? { [network]: ip } : {},
      imageId: s.spec.image,
      env: s.spec.env,
      storage: storageSeen(s.spec.storage, s.record.data?.shared ?? '', o.shared),
      network,
      memory: s.spec.limits.memory,
      cpus: s.spec.limits.cpus,
      pids: s.spec.limits.pids,
      tmpfs: s.spec.tmpfs,
      diskQuota: s.spec.limits.disk,
      oomKilled: podOomKilled(pod)
    }
  }

  async function createVolume (name: string, labels: Record<string, string>): Promise<void> {
    if (!validName(name)) throw new KubeError(`a volume name must be a DNS-1123 subdomain (a-z, 0-9, - and .), got "${name.slice(0, 100)}"`)
    try { await client.request('POST', client.path('persistentvolumeclaims'), { body: volumeObject(name, labels, o.pod) }) } catch (err) { if (!isConflict(err)) throw err }
  }

  const engine: SandboxEngine = {
    name: 'kubernetes',
    label: { engine: 'the Kubernetes engine', host: 'Kubernetes' },
    labelsAtClaim: true,

    async ping (timeoutMs = 5000) {
      await client.request('GET', client.path('pods'), { query: { labelSelector: `${ROLE_LABEL}=sandbox`, limit: '1' }, timeoutMs })
    },

    // A cluster pulls images on its nodes: the server cannot tell whether one is there. The reference
    // is the id; a missing image shows at the start (reason image-missing).
    async imageId (image) { return await Promise.resolve(image) },

    ...network,

    async create (spec) {
      if (!validName(spec.name)) throw new KubeError(`a sandbox name must be a DNS-1123 subdomain (a-z, 0-9, - and .), got "${spec.name.slice(0, 100)}"`)
      claimMounts(spec.storage, o.shared) // refuses what cannot be mounted before anything is made
      if (spec.network === 'none') await network.ensureNoNetwork()
      await createVolume(spec.storage.home.volume, spec.storage.home.labels)
      const id = newId()
      try {
        await client.request('POST', client.path('configmaps'), { body: recordObject(spec, id, o.shared?.claim ?? '') })
        records.named(id, spec.name)
      } catch (err) {
        if (isConflict(err)) return 'conflict'
        throw err
      }
      return { id }
    },

    start: life.start,
    pause: life.pause,
    unpause: life.unpause,
    stop: life.stop,
    kill: life.kill,

    async remove (id) {
      const s = await find(id)
      if (s === undefined) return
      await deletePod(client, s.id, 0)
      records.forget(s.id)
      inPod.forget(s.id)
      podUids.delete(s.id)
      try {
        await client.request('DELETE', client.path('configmaps', s.record.metadata.name), { body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: s.record.metadata.uid } } })
      } catch (err) { if (!isNotFound(err) && !isConflict(err)) throw err }
    },

    async inspect (idOrName) {
      const s = await find(idOrName)
      if (s === undefined) return null
      return details(s, await getPod(client, s.id))
    },

    async list (labelFilters) {
      const [records, pods] = await Promise.all([
        listAll<ConfigMap>(client.path('configmaps'), selector([`${ROLE_LABEL}=sandbox`, ...labelFilters])),
        listAll<Pod>(client.path('pods'), `${ROLE_LABEL}=sandbox`)
      ])
      const byId = new Map(pods.map(p => [p.metadata.name, p]))
      const out: SandboxSummary[] = []
      for (const r of records) {
        let s: Sandbox
        try { s = parse({ ...r, apiVersion: 'v1', kind: 'ConfigMap' }) } catch { continue }
        const d = details(s, byId.get(s.id))
        out.push({ id: d.id, name: d.name, running: d.running, paused: d.paused, labels: d.labels, addresses: d.addresses })
      }
      return out
    },

    async claim (id, identity) {
      const s = await find(id)
      if (s === undefined) return false
      if (!validName(identity.name)) throw new KubeError(`a sandbox name must be a DNS-1123 subdomain, got "${identity.name.slice(0, 100)}"`)
      const labels = { ...userLabels(s.record.metadata.labels), ...identity.labels }
      const renamed = recordObject({ ...s.spec, name: identity.name }, s.id, s.record.data?.shared ?? '', labels)
      if (paused.has(s.id)) renamed.metadata.annotations = { [PAUSED_ANNOTATION]: 'true' }
      try {
        await client.request('POST', client.path('configmaps'), { body: renamed })
        records.named(s.id, identity.name)
      } catch (err) {
        if (isConflict(err)) return 'conflict'
        throw err
      }
      try {
        await client.request('DELETE', client.path('configmaps', s.record.metadata.name), { body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: s.record.metadata.uid } } })
      } catch (err) { if (!isNotFound(err)) throw err }
      try {
        await client.request('PATCH', client.path('pods', s.id), { contentType: 'application/merge-patch+json', body: { metadata: { labels: identity.labels } } })
      } catch (err) { if (!isNotFound(err)) throw err }
      return true
    },

    createVolume,

    async listVolumes (labelFilters) {
      const items = await listAll<{ metadata: { name: string, labels?: Record<string, string>, creationTimestamp?: string } }>(client.path('persistentvolumeclaims'), selector(labelFilters))
      return items.map(v => ({ name: v.metadata.name, labels: userLabels(v.metadata.labels), ...(v.metadata.creationTimestamp === undefined ? {} : { createdAt: v.metadata.creationTimestamp }) }))
    },

    async removeVolume (name) {
      if (!validName(name)) return
      try { await client.request('DELETE', client.path('persistentvolumeclaims', name)) } catch (err) { if (!isNotFound(err)) throw err }
    },

    exec: inPod.exec,
    putFile: inPod.putFile,
    stats: inPod.stats,
    oomKills: inPod.oomKills,

    // The data areas are directories on the shared claim, which the server mounts: outputs is given to the sandbox user there.
    async giveOutputs (data, ids) { return o.shared === undefined || o.shared.claim === '' ? false : await giveOutputsDir(o.shared.dataDir, data, ids) },

    async diskUsage () {
      // The API reports no per-pod disk use; volumes' sizes are what their claims requested.
      const volumes = await listAll<{ metadata: { name: string, labels?: Record<string, string> } }>(client.path('persistentvolumeclaims'), `${ROLE_LABEL}=volume`)
      return { sandboxes: [], volumes: volumes.map(v => ({ name: v.metadata.name, labels: userLabels(v.metadata.labels), size: -1 })) }
    },

    // limits.disk becomes the pod's ephemeral-storage limit (the kubelet evicts a pod beyond it).
    async storageInfo () { return await Promise.resolve({ driver: 'kubernetes', backingFs: '', quota: true }) },

    ...leases,

    ...watchCalls({ client, podUids, getPod: async id => await getPod(client, id), closed: () => closed }),

    close () { closed = true; client.close() }
  }
  return engine
}
