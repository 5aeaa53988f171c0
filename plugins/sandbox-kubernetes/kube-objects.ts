import type { SandboxSpec } from '../sandbox/types.js'

/*
 * The Kubernetes engine's reading of the neutral sandbox spec (engine-types.ts): the objects it
 * creates. Pure: same spec, same objects (docs/engine.md#kubernetes).
 *
 * A sandbox is two objects: its **record**, a ConfigMap named by the sandbox's name that keeps the
 * spec, the engine's id and the labels (it exists from create to remove, whether a pod runs or not,
 * and a claim renames it), and, while it runs, a **Pod** named by the id. Volumes are
 * PersistentVolumeClaims, the isolated network a NetworkPolicy selecting the pods by label.
 */

/** The engine's own labels (left out of what inspect and list report). */
export const ID_LABEL = 'cubicle.id'
export const ROLE_LABEL = 'cubicle.role'
export const NETWORK_LABEL = 'cubicle.network'
export const PAUSED_ANNOTATION = 'cubicle.paused'
export const CONTAINER = 'sandbox'
/** Pods of sandboxes created with network 'none' get this label value and a policy that denies everything. */
export const NO_NETWORK = 'none'
export const NO_NETWORK_POLICY = 'cubicle-no-network'

export type Labels = Record<string, string>

export interface ObjectMeta {
  name: string
  namespace?: string
  uid?: string
  resourceVersion?: string
  labels?: Labels
  annotations?: Record<string, string>
  creationTimestamp?: string
  deletionTimestamp?: string
}

export interface ConfigMap { apiVersion: 'v1', kind: 'ConfigMap', metadata: ObjectMeta, data?: Record<string, string> }

export interface ContainerState {
  running?: { startedAt?: string }
  waiting?: { reason?: string, message?: string }
  terminated?: { exitCode?: number, reason?: string, message?: string }
}

export interface Pod {
  apiVersion?: 'v1'
  kind?: 'Pod'
  metadata: ObjectMeta
  spec?: Record<string, unknown>
  status?: {
    phase?: string
    podIP?: string
    conditions?: Array<{ type: string, status: string, reason?: string, message?: string }>
    containerStatuses?: Array<{ name: string, state?: ContainerState, lastState?: ContainerState, ready?: boolean }>
  }
}

export interface ListOf<T> { metadata?: { resourceVersion?: string, continue?: string }, items: T[] }

/** Options of the pods the engine makes, from the server's settings. */
export interface PodOptions {
  /** numeric user and group every process of a sandbox runs as (the image's `assistant`) */
  uid: number
  gid: number
  runtimeClassName?: string
  storageClassName?: string
  /** requested size of each PersistentVolumeClaim (a quantity: `10Gi`) */
  volumeSize: string
}

/** A DNS-1123 subdomain (object names): checked before anything is sent. */
export function validName (name: string): boolean {
  if (name.length === 0 || name.length > 253) return false
  for (const part of name.split('.')) {
    if (part.length === 0 || part.length > 63) return false
    for (let i = 0; i < part.length; i++) {
      const c = part.charCodeAt(i)
      const alnum = (c >= 97 && c <= 122) || (c >= 48 && c <= 57)
      if (!alnum && !(c === 45 && i > 0 && i < part.length - 1)) return false
    }
  }
  return true
}

/** The labels as the core set them: the engine's own left out. */
export function userLabels (labels: Labels | undefined): Labels {
  return Object.fromEntries(Object.entries(labels ?? {}).filter(([k]) => !k.startsWith('cubicle.')))
}

/** `key=value` filters as a label selector (the same syntax). */
export function selector (filters: string[]): string {
  return filters.join(',')
}

/** The record: the spec, the id and the shared claim the sandbox was created with (kube-storage.ts). */
export function recordObject (spec: SandboxSpec, id: string, sharedClaim: string, labels: Labels = spec.labels): ConfigMap {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: spec.name, labels: { ...labels, [ID_LABEL]: id, [ROLE_LABEL]: 'sandbox' } },
    data: { id, spec: JSON.stringify(spec), shared: sharedClaim }
  }
}

export function volumeObject (name: string, labels: Labels, o: PodOptions): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name, labels: { ...labels, [ROLE_LABEL]: 'volume' } },
    spec: {
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: o.volumeSize } },
      ...(o.storageClassName === undefined || o.storageClassName === '' ? {} : { storageClassName: o.storageClassName })
    }
  }
}

function quantityCpu (cpus: number): string { return `${Math.max(1, Math.round(cpus * 1000))}m` }

/** A PersistentVolumeClaim mounted into a sandbox (a directory of it with `subPath`). */
export interface ClaimMount { claim: string, target: string, readOnly: boolean, subPath?: string }

/** The pod of a sandbox's run, its storage as claims mounted (the engine maps the spec's storage to them). */
export function podObject (spec: SandboxSpec, id: string, labels: Labels, o: PodOptions, claims: ClaimMount[]): Pod {
  const volumes: Array<Record<string, unknown>> = []
  const mounts: Array<Record<string, unknown>> = []
  // One volume per claim (a shared claim is mounted several times by subPath); read-only per mount.
  const volumeOf = new Map<string, string>()
  for (const m of claims) {
    let name = volumeOf.get(m.claim)
    if (name === undefined) {
      name = `vol-${volumeOf.size}`
      volumeOf.set(m.claim, name)
      volumes.push({ name, persistentVolumeClaim: { claimName: m.claim } })
    }
    mounts.push({ name, mountPath: m.target, ...(m.subPath === undefined || m.subPath === '' ? {} : { subPath: m.subPath }), ...(m.readOnly ? { readOnly: true } : {}) })
  }
  Object.entries(spec.tmpfs).forEach(([target, t], i) => {
    volumes.push({ name: `tmpfs-${i}`, emptyDir: { medium: 'Memory', sizeLimit: String(t.size) } })
    mounts.push({ name: `tmpfs-${i}`, mountPath: target })
  })
  const { limits } = spec
  if (limits.shm > 0 && spec.tmpfs['/dev/shm'] === undefined) {
    volumes.push({ name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: String(limits.shm) } })
    mounts.push({ name: 'shm', mountPath: '/dev/shm' })
  }
  const resources: Record<string, string> = { memory: String(limits.memory), cpu: quantityCpu(limits.cpus) }
  if (limits.disk > 0) resources['ephemeral-storage'] = String(limits.disk)
  const seccompProfile = { type: 'RuntimeDefault' }
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: id, labels: { ...labels, [ID_LABEL]: id, [ROLE_LABEL]: 'sandbox', [NETWORK_LABEL]: spec.network === 'none' ? NO_NETWORK : spec.network } },
    spec: {
      hostname: spec.hostname,
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 10,
      // A minimal init as PID 1 (the pod's pause process, which reaps orphans) when the spec asks for one.
      ...(spec.security.init ? { shareProcessNamespace: true } : {}),
      ...(o.runtimeClassName === undefined || o.runtimeClassName === '' ? {} : { runtimeClassName: o.runtimeClassName }),
      securityContext: { runAsNonRoot: true, runAsUser: o.uid, runAsGroup: o.gid, fsGroup: o.gid, seccompProfile },
      containers: [{
        name: CONTAINER,
        image: spec.image,
        imagePullPolicy: 'IfNotPresent',
        args: spec.command,
        workingDir: spec.workdir,
        env: spec.env.map(e => { const eq = e.indexOf('='); return { name: eq < 0 ? e : e.slice(0, eq), value: eq < 0 ? '' : e.slice(eq + 1) } }),
        resources: { requests: resources, limits: resources },
        securityContext: {
          runAsNonRoot: true,
          runAsUser: o.uid,
          runAsGroup: o.gid,
          privileged: false,
          allowPrivilegeEscalation: !spec.security.noNewPrivileges,
          capabilities: { drop: spec.security.dropCapabilities ? ['ALL'] : [] },
          seccompProfile
        },
        volumeMounts: mounts
      }],
      volumes
    }
  }
}

/** The isolated network: sandboxes receive nothing from each other; they send only to DNS and to the server (`proxyPort`: only that port). */
export function networkPolicyObject (name: string, labels: Labels, server: { selector?: Labels, address?: string }, proxyPort?: number): Record<string, unknown> {
  const dns = {
    to: [{ namespaceSelector: {}, podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } }],
    ports: [{ protocol: 'UDP', port: 53 }, { protocol: 'TCP', port: 53 }]
  }
  const to: Array<Record<string, unknown>> = []
  if (server.selector !== undefined && Object.keys(server.selector).length > 0) to.push({ podSelector: { matchLabels: server.selector } })
  if (server.address !== undefined && /^\d{1,3}(\.\d{1,3}){3}$/.test(server.address)) to.push({ ipBlock: { cidr: `${server.address}/32` } })
  const egress: Array<Record<string, unknown>> = [dns]
  // A rule without `to` would allow every destination: with nothing to name the server, only DNS.
  if (to.length > 0) egress.push({ to, ...(proxyPort === undefined ? {} : { ports: [{ protocol: 'TCP', port: proxyPort }] }) })
  const ingress = server.selector !== undefined && Object.keys(server.selector).length > 0 ? [{ from: [{ podSelector: { matchLabels: server.selector } }] }] : []
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name, labels: { ...labels, [ROLE_LABEL]: 'network' } },
    spec: { podSelector: { matchLabels: { [NETWORK_LABEL]: name } }, policyTypes: ['Ingress', 'Egress'], ingress, egress }
  }
}

/** Pods created without a network: nothing in, nothing out. */
export function noNetworkPolicyObject (): Record<string, unknown> {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: NO_NETWORK_POLICY, labels: { [ROLE_LABEL]: 'network' } },
    spec: { podSelector: { matchLabels: { [NETWORK_LABEL]: NO_NETWORK } }, policyTypes: ['Ingress', 'Egress'], ingress: [], egress: [] }
  }
}

/** Parses `a=b,c=d` (a server pod selector setting). */
export function parseLabelPairs (text: string): Labels {
  const out: Labels = {}
  for (const part of text.split(',').map(s => s.trim()).filter(s => s !== '')) {
    const eq = part.indexOf('=')
    if (eq <= 0) throw new Error(`a label selector entry must be key=value, got "${part.slice(0, 100)}"`)
    out[part.slice(0, eq)] = part.slice(eq + 1)
  }
  return out
}
