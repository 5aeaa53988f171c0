import type { SandboxDetails, SandboxEngine, SandboxSummary } from '../sandbox/types.js'
import { KubeClient } from './kube-client.js'
import type { KubeConnection } from './kube-config.js'
import { isConflict, isNotFound, KubeError } from './kube-error.js'
import { execCalls } from './kube-exec.js'
import { leaseCalls } from './kube-lease.js'
import { networkCalls, type ServerEndpoint } from './kube-network.js'
import { PAUSED_ANNOTATION, ROLE_LABEL, podObject, recordObject, selector, userLabels, validName, volumeObject, type ConfigMap, type Pod, type PodOptions } from './kube-objects.js'
import { podFailure, podOomKilled, podRunning, waitPod } from './kube-pods.js'
import { newId, recordCalls, type Sandbox } from './kube-records.js'
import { StartQueue } from './kube-starts.js'
import { claimMounts, storageSeen, type SharedStorage } from './kube-storage.js'
import { watchCalls } from './kube-watch.js'
import { giveOutputsDir } from '../../core/area-owner.js'

/*
 * The Kubernetes engine (docs/engine.md#kubernetes): the engine contract of plugins/sandbox/engine-types.ts
 * on any conformant cluster, with nothing but core objects. A sandbox is a record (a ConfigMap named by
 * the sandbox's name: its spec, id and labels) and, while it runs, a Pod named by its id; start creates
 * the pod and waits until it runs, stop deletes it (volumes, the record and so the sandbox stay). Pause
 * freezes every process of the sandbox's user with SIGSTOP (Kubernetes has no pause) and marks the
 * record; while marked, execs are refused. Claim renames the record and relabels record and pod. The
 * records: kube-records.ts; the watch of ended pods: kube-watch.ts; pods brought up at once: kube-starts.ts.
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
  const startTimeoutMs = o.startTimeoutMs ?? 300_000
  const records = recordCalls(client)
  const { paused, parse, find, mustFind, listAll, setPaused } = records
  /** The uid of the pod this engine last created per sandbox: the watch tells its end at once (no look-up). */
  const podUids = new Map<string, string>()
  const starts = new StartQueue(o.maxStarting ?? 0)
  let closed = false

  async function getPod (id: string): Promise<Pod | undefined> {
    try { return await client.request<Pod>('GET', client.path('pods', id)) } catch (err) { if (isNotFound(err)) return undefined; throw err }
  }

  /** Deletes the pod and waits until it is gone (a new start then gets a fresh one). */
  async function deletePod (id: string, graceSeconds: number): Promise<boolean> {
    try {
      await client.request('DELETE', client.path('pods', id), { body: { apiVersion: 'v1', kind: 'DeleteOptions', gracePeriodSeconds: graceSeconds, propagationPolicy: 'Background' } })
    } catch (err) { if (!isNotFound(err)) throw err; return false }
    await waitPod(client, id, 'gone', (graceSeconds + 60) * 1000)
    return true
  }

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

  const execs = execCalls({
    client,
    user,
    paused: id => paused.has(id),
    explain: async (id, err) => {
      const s = await find(id)
      if (s === undefined) return err.as('no-such-sandbox')
      return err.as('not-running', `sandbox ${id} is not running: ${err.message}`)
    }
  })
  const network = networkCalls(client, o.server)
  const leases = leaseCalls(client)
  /** OOM-kill counters seen per sandbox (the cgroup's count since the pod started). */
  const oomSeen = new Map<string, Array<{ at: number, count: number }>>()

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

    async start (id) {
      const s = await mustFind(id)
      const pod = await getPod(s.id)
      if (podRunning(pod)) {
        if (paused.has(s.id)) await engine.unpause(s.id)
        return
      }
      // A pod still starting (a start before a restart of the server, an image being pulled) is waited for;
      // one that ended, or is being deleted, goes first.
      if (pod !== undefined && pod.metadata.deletionTimestamp === undefined && podFailure(pod) === undefined) {
        await waitPod(client, s.id, 'running', startTimeoutMs)
        return
      }
      if (pod !== undefined) await deletePod(s.id, 0)
      if (paused.has(s.id)) await setPaused(s, false)
      await starts.run(async () => {
        try {
          const made = await client.request<Pod>('POST', client.path('pods'), { body: podObject(s.spec, s.id, userLabels(s.record.metadata.labels), o.pod, claimMounts(s.spec.storage, o.shared)) })
          if (made.metadata.uid !== undefined) podUids.set(s.id, made.metadata.uid)
        } catch (err) {
          if (!isConflict(err)) throw err
        }
        await waitPod(client, s.id, 'running', startTimeoutMs)
      })
    },

    async pause (id) {
      const s = await mustFind(id)
      if (!podRunning(await getPod(s.id))) throw new KubeError(`sandbox ${id} is not running`, { reason: 'not-running', statusCode: 409 })
      if (paused.has(s.id)) return
      // Marked first: no exec starts in between; then every process of the sandbox's user is frozen.
      await setPaused(s, true)
      paused.delete(s.id)
      try { await execs.signalAll(s.id, 'STOP') } finally { paused.add(s.id) }
    },

    async unpause (id) {
      const s = await mustFind(id)
      if (!podRunning(await getPod(s.id))) throw new KubeError(`sandbox ${id} is not running`, { reason: 'not-running', statusCode: 409 })
      if (!paused.has(s.id)) return
      paused.delete(s.id)
      await execs.signalAll(s.id, 'CONT')
      await setPaused(s, false)
    },

    async stop (id, graceSeconds) {
      const s = await find(id)
      if (s === undefined) return false
      if (paused.has(s.id)) {
        // A frozen process cannot handle SIGTERM: thaw it for its grace period.
        paused.delete(s.id)
        await execs.signalAll(s.id, 'CONT').catch(() => {})
        await setPaused(s, false)
      }
      await deletePod(s.id, Math.max(0, Math.floor(graceSeconds)))
      return true
    },

    async kill (id) {
      const s = await find(id)
      if (s === undefined) return
      await deletePod(s.id, 0)
      if (paused.has(s.id)) await setPaused(s, false)
    },

    async remove (id) {
      const s = await find(id)
      if (s === undefined) return
      await deletePod(s.id, 0)
      records.forget(s.id)
      oomSeen.delete(s.id)
      podUids.delete(s.id)
      try {
        await client.request('DELETE', client.path('configmaps', s.record.metadata.name), { body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: s.record.metadata.uid } } })
      } catch (err) { if (!isNotFound(err) && !isConflict(err)) throw err }
    },

    async inspect (idOrName) {
      const s = await find(idOrName)
      if (s === undefined) return null
      return details(s, await getPod(s.id))
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

    exec: execs.exec,

    // Files belong to the sandbox's user whatever uid and gid the caller named: the pod's processes
    // cannot give a file away (docs/engine.md#kubernetes).
    async putFile (id, path, content, mode) { await execs.putFile(id, path, content, mode) },

    // The data areas are directories on the shared claim, which the server mounts: outputs is given to the sandbox user there.
    async giveOutputs (data, ids) { return o.shared === undefined || o.shared.claim === '' ? false : await giveOutputsDir(o.shared.dataDir, data, ids) },

    async stats (id) {
      const s = await mustFind(id)
      const st = await execs.stats(s.id, { memory: s.spec.limits.memory })
      const seen = oomSeen.get(s.id) ?? []
      seen.push({ at: Date.now(), count: st.oomKills })
      oomSeen.set(s.id, seen.slice(-16))
      return { pids: st.pids, memory: st.memory }
    },

    async oomKills (id, sinceMs, untilMs) {
      const s = await find(id)
      if (s === undefined) return 0
      const pod = await getPod(s.id)
      let count = podOomKilled(pod) ? 1 : 0
      if (podRunning(pod) && !paused.has(s.id)) {
        const now = (await execs.stats(s.id, { memory: s.spec.limits.memory }).catch(() => undefined))?.oomKills
        if (now !== undefined) {
          const seen = oomSeen.get(s.id) ?? []
          const before = [...seen].reverse().find(x => x.at <= sinceMs)
          if (untilMs >= Date.now() - 1000) count += Math.max(0, now - (before?.count ?? 0))
          seen.push({ at: Date.now(), count: now })
          oomSeen.set(s.id, seen.slice(-16))
        }
      }
      return count
    },

    async diskUsage () {
      // The API reports no per-pod disk use; volumes' sizes are what their claims requested.
      const volumes = await listAll<{ metadata: { name: string, labels?: Record<string, string> } }>(client.path('persistentvolumeclaims'), `${ROLE_LABEL}=volume`)
      return { sandboxes: [], volumes: volumes.map(v => ({ name: v.metadata.name, labels: userLabels(v.metadata.labels), size: -1 })) }
    },

    // limits.disk becomes the pod's ephemeral-storage limit (the kubelet evicts a pod beyond it).
    async storageInfo () { return await Promise.resolve({ driver: 'kubernetes', backingFs: '', quota: true }) },

    ...leases,

    ...watchCalls({ client, podUids, getPod, closed: () => closed }),

    close () { closed = true; client.close() }
  }
  return engine
}
