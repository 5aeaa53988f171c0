import type { KubeClient } from './kube-client.js'
import { isNotFound, KubeError } from './kube-error.js'
import type { ContainerState, ListOf, Pod } from './kube-objects.js'

/*
 * Pod state as the engine reads it, the look-up and deletion of a pod, and the waits on it: a start waits
 * until the pod's container runs (or fails for good), a stop until the pod is gone. Both watch the one
 * pod from the resourceVersion of a list, so no change between the look and the watch is missed.
 */

export type PodWait = 'running' | 'gone'

/** The pod's container state, if it has one. */
export function containerState (pod: Pod | undefined): ContainerState | undefined {
  return pod?.status?.containerStatuses?.[0]?.state
}

/** Its processes run: not being deleted, phase Running, the container running. */
export function podRunning (pod: Pod | undefined): boolean {
  return pod !== undefined && pod.metadata.deletionTimestamp === undefined && pod.status?.phase === 'Running' && containerState(pod)?.running !== undefined
}

/** A pod that will never run (again): its container ended (restartPolicy Never) or cannot be made. */
export function podFailure (pod: Pod): KubeError | undefined {
  const state = containerState(pod)
  const waiting = state?.waiting
  const what = `pod ${pod.metadata.name}`
  if (waiting !== undefined) {
    const reason = waiting.reason ?? ''
    const message = (waiting.message ?? '').slice(0, 500)
    if (['ErrImagePull', 'ImagePullBackOff', 'InvalidImageName', 'ErrImageNeverPull'].includes(reason)) return new KubeError(`${what}: the image cannot be pulled (${reason}: ${message})`, { reason: 'image-missing' })
    if (['CreateContainerConfigError', 'CreateContainerError', 'RunContainerError'].includes(reason)) return new KubeError(`${what}: the container cannot be created (${reason}: ${message})`)
  }
  if (pod.status?.phase === 'Failed' || pod.status?.phase === 'Succeeded' || state?.terminated !== undefined) {
    const t = state?.terminated
    return new KubeError(`${what}: the sandbox's main process ended (${t?.reason ?? pod.status?.phase ?? 'terminated'}, exit code ${String(t?.exitCode ?? 'unknown')})`)
  }
  return undefined
}

/** Whether the pod's last run ended for lack of memory. */
export function podOomKilled (pod: Pod | undefined): boolean {
  const s = pod?.status?.containerStatuses?.[0]
  return s?.state?.terminated?.reason === 'OOMKilled' || s?.lastState?.terminated?.reason === 'OOMKilled'
}

/** The pod named `name`, or undefined when there is none. */
export async function getPod (client: KubeClient, name: string): Promise<Pod | undefined> {
  try { return await client.request<Pod>('GET', client.path('pods', name)) } catch (err) { if (isNotFound(err)) return undefined; throw err }
}

/** Deletes the pod and waits until it is gone (a new start then gets a fresh one); false when there was none. */
export async function deletePod (client: KubeClient, name: string, graceSeconds: number): Promise<boolean> {
  try {
    await client.request('DELETE', client.path('pods', name), { body: { apiVersion: 'v1', kind: 'DeleteOptions', gracePeriodSeconds: graceSeconds, propagationPolicy: 'Background' } })
  } catch (err) { if (!isNotFound(err)) throw err; return false }
  await waitPod(client, name, 'gone', (graceSeconds + 60) * 1000)
  return true
}

/** Waits until the pod named `name` runs (rejects when it fails for good) or is gone. */
export async function waitPod (client: KubeClient, name: string, until: PodWait, timeoutMs: number): Promise<Pod | undefined> {
  const deadline = Date.now() + timeoutMs
  const check = (pod: Pod | undefined): { done: boolean, pod?: Pod } => {
    if (until === 'gone') return { done: pod === undefined }
    if (pod === undefined) throw new KubeError(`pod ${name} was deleted while it started`, { reason: 'not-running' })
    if (podRunning(pod)) return { done: true, pod }
    if (pod.metadata.deletionTimestamp !== undefined) throw new KubeError(`pod ${name} is being deleted`, { reason: 'not-running' })
    const failure = podFailure(pod)
    if (failure !== undefined) throw failure
    return { done: false }
  }
  for (;;) {
    const list = await client.request<ListOf<Pod>>('GET', client.path('pods'), { query: { fieldSelector: `metadata.name=${name}` } })
    const first = check(list.items[0])
    if (first.done) return first.pod
    const left = deadline - Date.now()
    if (left <= 0) break
    let result: { done: boolean, pod?: Pod, err?: unknown } = { done: false }
    const w = client.watch<Pod>(client.path('pods'), {
      fieldSelector: `metadata.name=${name}`,
      resourceVersion: list.metadata?.resourceVersion,
      timeoutSeconds: String(Math.max(1, Math.ceil(left / 1000)))
    }, ev => {
      if (result.done) return
      if (ev.type === 'ERROR') { w.close(); return } // 410 Expired and the like: list again
      if (ev.type === 'BOOKMARK') return
      try { result = check(ev.type === 'DELETED' ? undefined : ev.object) } catch (err) { result = { done: true, err } }
      if (result.done) w.close()
    })
    const timer = setTimeout(() => { w.close() }, left)
    try { await w.done } finally { clearTimeout(timer) }
    if (result.err !== undefined) throw result.err
    if (result.done) return result.pod
    if (Date.now() >= deadline) break
  }
  const what = until === 'running' ? 'run' : 'go away'
  throw new KubeError(`pod ${name} did not ${what} within ${Math.round(timeoutMs / 1000)} s`, { busy: true })
}
