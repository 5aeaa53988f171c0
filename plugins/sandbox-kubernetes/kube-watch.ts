import type { SandboxEngine } from '../sandbox/types.js'
import type { KubeClient, Watch } from './kube-client.js'
import { ROLE_LABEL, type ListOf, type Pod } from './kube-objects.js'
import { podFailure, podRunning } from './kube-pods.js'

/*
 * The engine's watchSandboxes (engine-types.ts): one watch of every sandbox pod from the resourceVersion
 * of a list, again after a pause whenever it ends, telling the core each sandbox whose pod ended or went.
 */

export interface WatchDeps {
  client: KubeClient
  /** the uid of the pod this engine last created per sandbox (taken when told) */
  podUids: Map<string, string>
  getPod: (id: string) => Promise<Pod | undefined>
  closed: () => boolean
}

export function watchCalls (d: WatchDeps): Pick<SandboxEngine, 'watchSandboxes'> {
  const { client, podUids } = d
  return {
    watchSandboxes (onEnd) {
      let stopped = false
      let current: Watch | undefined
      /**
       * A pod that ended or went: told unless the sandbox runs again meanwhile (a pod of the same name,
       * another uid). The pod this engine made last is told at once, in the event's turn: a pod deleted
       * outside leaves the API before its container is killed, and a call between the two would still
       * reach the old container (and be cut off) if the core learned of it only after a look-up.
       */
      const ended = async (pod: Pod): Promise<void> => {
        const name = pod.metadata.name
        const known = podUids.get(name)
        if (known !== undefined && known === pod.metadata.uid) { podUids.delete(name); onEnd(name); return }
        if (known !== undefined) return // a newer pod of the sandbox, made since
        const now = await d.getPod(name).catch(() => undefined)
        if (podRunning(now) && now?.metadata.uid !== pod.metadata.uid) return
        if (podRunning(now)) return
        onEnd(name)
      }
      void (async () => {
        let backoff = 500
        while (!stopped && !d.closed()) {
          try {
            const list = await client.request<ListOf<Pod>>('GET', client.path('pods'), { query: { labelSelector: `${ROLE_LABEL}=sandbox`, limit: '1' } })
            current = client.watch<Pod>(client.path('pods'), { labelSelector: `${ROLE_LABEL}=sandbox`, resourceVersion: list.metadata?.resourceVersion, allowWatchBookmarks: 'true' }, ev => {
              if (ev.type === 'ERROR') { current?.close(); return }
              if (ev.type === 'DELETED' || ((ev.type === 'MODIFIED' || ev.type === 'ADDED') && (ev.object.metadata.deletionTimestamp !== undefined || podFailure(ev.object) !== undefined))) {
                void ended(ev.object).catch(() => {})
              }
            })
            if (stopped || d.closed()) current.close()
            await current.done
            backoff = 500
          } catch { /* the API is away: look again after a pause */ }
          if (stopped || d.closed()) break
          await new Promise(resolve => setTimeout(resolve, backoff))
          backoff = Math.min(backoff * 2, 10_000)
        }
      })()
      return () => { stopped = true; current?.close() }
    }
  }
}
