import type { SandboxEngine } from '../sandbox/types.js'
import type { KubeClient } from './kube-client.js'
import { isConflict, KubeError } from './kube-error.js'
import type { Execs } from './kube-exec.js'
import { podObject, userLabels, type Pod, type PodOptions } from './kube-objects.js'
import { deletePod, getPod, podFailure, podRunning, waitPod } from './kube-pods.js'
import type { Records } from './kube-records.js'
import { StartQueue } from './kube-starts.js'
import { claimMounts, type SharedStorage } from './kube-storage.js'

/*
 * A sandbox's pod through its life (kube-engine.ts): start builds the pod from the record's spec
 * (kube-objects.ts, its storage as claims: kube-storage.ts) and waits until it runs, at most
 * `maxStarting` at once (kube-starts.ts); stop and kill delete it (the record and volumes stay). Pause
 * freezes every process of the sandbox's user with SIGSTOP (Kubernetes has no pause) and marks the
 * record; while marked, execs are refused.
 */

export interface LifecycleDeps {
  client: KubeClient
  records: Records
  signalAll: Execs['signalAll']
  pod: PodOptions
  shared?: SharedStorage
  /** how long a start waits for the pod to run (image pulls included) */
  startTimeoutMs: number
  /** pods brought up at once; 0 = no bound */
  maxStarting: number
}

export type Lifecycle = Pick<SandboxEngine, 'start' | 'pause' | 'unpause' | 'stop' | 'kill'> & {
  /** The uid of the pod this engine last created per sandbox: the watch tells its end at once (no look-up). */
  podUids: Map<string, string>
}

export function lifecycleCalls (d: LifecycleDeps): Lifecycle {
  const { client, records, signalAll } = d
  const { paused, find, mustFind, setPaused } = records
  const podUids = new Map<string, string>()
  const starts = new StartQueue(d.maxStarting)

  async function unpause (id: string): Promise<void> {
    const s = await mustFind(id)
    if (!podRunning(await getPod(client, s.id))) throw new KubeError(`sandbox ${id} is not running`, { reason: 'not-running', statusCode: 409 })
    if (!paused.has(s.id)) return
    paused.delete(s.id)
    await signalAll(s.id, 'CONT')
    await setPaused(s, false)
  }

  return {
    podUids,
    unpause,

    async start (id) {
      const s = await mustFind(id)
      const pod = await getPod(client, s.id)
      if (podRunning(pod)) {
        if (paused.has(s.id)) await unpause(s.id)
        return
      }
      // A pod still starting (a start before a restart of the server, an image being pulled) is waited for;
      // one that ended, or is being deleted, goes first.
      if (pod !== undefined && pod.metadata.deletionTimestamp === undefined && podFailure(pod) === undefined) {
        await waitPod(client, s.id, 'running', d.startTimeoutMs)
        return
      }
      if (pod !== undefined) await deletePod(client, s.id, 0)
      if (paused.has(s.id)) await setPaused(s, false)
      await starts.run(async () => {
        try {
          const made = await client.request<Pod>('POST', client.path('pods'), { body: podObject(s.spec, s.id, userLabels(s.record.metadata.labels), d.pod, claimMounts(s.spec.storage, d.shared)) })
          if (made.metadata.uid !== undefined) podUids.set(s.id, made.metadata.uid)
        } catch (err) {
          if (!isConflict(err)) throw err
        }
        await waitPod(client, s.id, 'running', d.startTimeoutMs)
      })
    },

    async pause (id) {
      const s = await mustFind(id)
      if (!podRunning(await getPod(client, s.id))) throw new KubeError(`sandbox ${id} is not running`, { reason: 'not-running', statusCode: 409 })
      if (paused.has(s.id)) return
      // Marked first: no exec starts in between; then every process of the sandbox's user is frozen.
      await setPaused(s, true)
      paused.delete(s.id)
      try { await signalAll(s.id, 'STOP') } finally { paused.add(s.id) }
    },

    async stop (id, graceSeconds) {
      const s = await find(id)
      if (s === undefined) return false
      if (paused.has(s.id)) {
        // A frozen process cannot handle SIGTERM: thaw it for its grace period.
        paused.delete(s.id)
        await signalAll(s.id, 'CONT').catch(() => {})
        await setPaused(s, false)
      }
      await deletePod(client, s.id, Math.max(0, Math.floor(graceSeconds)))
      return true
    },

    async kill (id) {
      const s = await find(id)
      if (s === undefined) return
      await deletePod(client, s.id, 0)
      if (paused.has(s.id)) await setPaused(s, false)
    }
  }
}
