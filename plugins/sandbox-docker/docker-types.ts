import type { Duplex } from 'node:stream'
import type { MonitorClient } from './docker-monitor.js'

/*
 * The shapes of the Docker adapter (docker-client.ts builds it): what the sandbox driver reads about
 * containers, networks and volumes, and the DockerClient interface itself.
 */

export interface ContainerSummary {
  id: string
  /** without the leading slash */
  name: string
  running: boolean
  labels: Record<string, string>
}

export interface ContainerDetails extends ContainerSummary {
  /** image id the container runs (sha256:…) */
  imageId: string
  env: string[]
  mounts: Array<{ type: string, source: string, target: string, readOnly: boolean }>
  networkMode: string
  /** IPv4 address per attached network (empty when stopped) */
  addresses: Record<string, string>
  memory: number
  nanoCpus: number
  pidsLimit: number
  /** tmpfs mounts: target → options */
  tmpfs: Record<string, string>
  /** StorageOpt size of the writable layer as created ('' when none) */
  storageSize: string
  /** the main process was killed for lack of memory (the container's last stop) */
  oomKilled: boolean
}

export interface NetworkInfo {
  id: string
  internal: boolean
  /** the host's address on the network (the bridge's gateway), null when Docker reports none */
  gateway: string | null
  subnet: string | null
  /** host interface of the bridge */
  bridge: string
}

export interface VolumeSummary { name: string, labels: Record<string, string>, createdAt?: string }

export interface ExecSpec {
  argv: string[]
  user?: string
  cwd?: string
  /** `KEY=value` entries */
  env?: string[]
  /** attach stdin (the returned socket is writable; end() closes the process's stdin) */
  stdin?: boolean
  tty?: boolean
  /** the caller's cancellation: also ends the wait for an exec slot (issue #11) */
  signal?: AbortSignal
  /** absolute deadline (ms, Date.now clock) for the wait and the set-up: the caller's own timeout */
  deadline?: number
}

/** A started exec: the raw hijacked connection (Docker's multiplexed frames unless tty). */
export interface ExecHandle {
  id: string
  socket: Duplex
}

export interface ExecState { running: boolean, exitCode: number | null, pid: number }

export interface DockerClient extends MonitorClient {
  ping (timeoutMs?: number): Promise<void>
  /** Image id, or null when the image is not present locally. Never pulls. */
  imageId (image: string): Promise<string | null>
  /**
   * Creates an internal bridge network (no route out, inter-container communication disabled) unless
   * it exists; answers what the existing or new network is (an old network may not be internal).
   */
  ensureNetwork (name: string, labels: Record<string, string>): Promise<NetworkInfo & { result: 'created' | 'exists' }>
  /** `config` is a Docker create body (container-config.ts). */
  createContainer (config: object): Promise<{ id: string } | 'conflict'>
  /** 304 (already running) is success. */
  startContainer (id: string): Promise<void>
  /** 304 (not running) is success; false when the container does not exist. */
  stopContainer (id: string, graceSeconds: number): Promise<boolean>
  killContainer (id: string): Promise<void>
  /** 404 is success. */
  removeContainer (id: string): Promise<void>
  /** null when it does not exist */
  inspectContainer (idOrName: string): Promise<ContainerDetails | null>
  listContainers (labelFilters: string[]): Promise<ContainerSummary[]>
  createVolume (name: string, labels: Record<string, string>): Promise<void>
  listVolumes (labelFilters: string[]): Promise<VolumeSummary[]>
  /** 404 is success. */
  removeVolume (name: string): Promise<void>
  listNetworks (labelFilters: string[]): Promise<Array<{ id: string, name: string }>>
  /** 404 is success. */
  removeNetwork (idOrName: string): Promise<void>
  /** Creates and starts an exec; throws DockerError 404/409 when the container is gone or stopped. */
  exec (containerId: string, spec: ExecSpec): Promise<ExecHandle>
  execInspect (execId: string): Promise<ExecState>
  execResize (execId: string, cols: number, rows: number): Promise<void>
  /** Writes one file into the container (parent dir must exist). */
  putFile (containerId: string, path: string, content: Buffer, mode: number, uid: number, gid: number): Promise<void>
  /** Drops pooled connections (streams in use are ended by their owners). */
  close (): void
  /** Renames a container; 'conflict' when the new name is taken (409), false when the container does not exist. */
  renameContainer (id: string, name: string): Promise<true | false | 'conflict'>
}
