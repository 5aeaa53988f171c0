import type { Duplex } from 'node:stream'
import Docker from 'dockerode'
import tar from 'tar-stream'
import { createAgent, parseDockerHost } from './docker-endpoint.js'
import { DockerError, toDockerError } from './docker-error.js'
import { createMonitorClient, type MonitorClient } from './docker-monitor.js'

/*
 * The file that builds the dockerode client: a narrow adapter with the calls the sandbox driver needs
 * (docker-monitor.ts adds the resource and disk-usage reports over the same client).
 * Known statuses are absorbed here (304 on start/stop, 404 on remove, 409 on create is reported as a
 * conflict), everything else becomes a DockerError that says whether the engine itself is unreachable.
 * Idle keep-alive sockets are unref'd by the agent, so an idle client never holds the process open.
 */

export { DockerError, toDockerError } from './docker-error.js'

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
}

/** A started exec: the raw hijacked connection (Docker's multiplexed frames unless tty). */
export interface ExecHandle {
  id: string
  socket: Duplex
}

export interface ExecState { running: boolean, exitCode: number | null, pid: number }

/** Per-request bound for control-plane calls (streams have none). */
const CALL_TIMEOUT_MS = 30_000

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

function tarOneFile (path: string, content: Buffer, mode: number, uid: number, gid: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const pack = tar.pack()
    const chunks: Buffer[] = []
    pack.on('data', (c: unknown) => { chunks.push(c as Buffer) })
    pack.on('end', () => resolve(Buffer.concat(chunks)))
    pack.on('error', reject)
    const name = path.slice(path.lastIndexOf('/') + 1)
    pack.entry({ name, size: content.length, mode, uid, gid, mtime: new Date(), type: 'file' }, content, err => {
      if (err !== undefined && err !== null) { reject(err); return }
      pack.finalize()
    })
  })
}

export function createDockerClient (host: string): DockerClient {
  const endpoint = parseDockerHost(host)
  const agent = createAgent(endpoint)
  const docker = new Docker({ ...endpoint.docker, ...(agent === undefined ? {} : { agent }) } as Docker.DockerOptions)
  const signal = (ms = CALL_TIMEOUT_MS): AbortSignal => AbortSignal.timeout(ms)
  // dockerode's typings omit abortSignal on most option objects; a non-literal `{}` passes it through.
  const opt = (extra: Record<string, unknown> = {}, ms = CALL_TIMEOUT_MS): {} => ({ ...extra, abortSignal: signal(ms) })

  async function call<T> (what: string, fn: () => Promise<T>): Promise<T> {
    try { return await fn() } catch (err) { throw toDockerError(err, what) }
  }

  return {
    ...createMonitorClient(docker, CALL_TIMEOUT_MS),

    async ping (timeoutMs = 2000) {
      await call('ping', async () => await (docker.ping as (o: {}) => Promise<unknown>).call(docker, opt({}, timeoutMs)))
    },

    async imageId (image) {
      try {
        const info = await docker.getImage(image).inspect(opt())
        return info.Id
      } catch (err) {
        const e = toDockerError(err, `image inspect ${image}`)
        if (e.statusCode === 404) return null
        throw e
      }
    },

    async ensureNetwork (name, labels) {
      const describeNetwork = async (): Promise<NetworkInfo | null> => {
        try {
          const n = await docker.getNetwork(name).inspect() as unknown as { Id: string, Internal?: boolean, Options?: Record<string, string>, IPAM?: { Config?: Array<{ Gateway?: string, Subnet?: string }> } }
          const v4 = (n.IPAM?.Config ?? []).find(c => c.Subnet !== undefined && !c.Subnet.includes(':'))
          return {
            id: n.Id,
            internal: n.Internal === true,
            gateway: v4?.Gateway ?? null,
            subnet: v4?.Subnet ?? null,
            bridge: n.Options?.['com.docker.network.bridge.name'] ?? `br-${n.Id.slice(0, 12)}`
          }
        } catch (err) {
          const e = toDockerError(err, `network inspect ${name}`)
          if (e.statusCode === 404) return null
          throw e
        }
      }
      const existing = await describeNetwork()
      if (existing !== null) return { ...existing, result: 'exists' }
      try {
        await docker.createNetwork({
          Name: name,
          Driver: 'bridge',
          CheckDuplicate: true,
          Internal: true,
          Attachable: false,
          Labels: labels,
          Options: { 'com.docker.network.bridge.enable_icc': 'false' },
          abortSignal: signal()
        } as Docker.NetworkCreateOptions)
      } catch (err) {
        const e = toDockerError(err, `network create ${name}`)
        if (e.statusCode !== 409) throw e
      }
      const created = await describeNetwork()
      if (created === null) throw new DockerError(`network ${name} vanished after creation`, 404, false)
      return { ...created, result: 'created' }
    },

    async createContainer (config) {
      try {
        const c = await docker.createContainer({ ...config, abortSignal: signal() } as Docker.ContainerCreateOptions)
        return { id: c.id }
      } catch (err) {
        const e = toDockerError(err, 'container create')
        if (e.statusCode === 409) return 'conflict'
        throw e
      }
    },

    async startContainer (id) {
      try {
        await docker.getContainer(id).start(opt())
      } catch (err) {
        const e = toDockerError(err, 'container start')
        if (e.statusCode === 304) return
        throw e
      }
    },

    async stopContainer (id, graceSeconds) {
      try {
        await docker.getContainer(id).stop(opt({ t: graceSeconds }, (graceSeconds + 30) * 1000))
        return true
      } catch (err) {
        const e = toDockerError(err, 'container stop')
        if (e.statusCode === 304) return true
        if (e.statusCode === 404) return false
        throw e
      }
    },

    async killContainer (id) {
      try {
        await docker.getContainer(id).kill(opt())
      } catch (err) {
        const e = toDockerError(err, 'container kill')
        if (e.statusCode === 404 || e.statusCode === 409 || e.statusCode === 304) return
        throw e
      }
    },

    async removeContainer (id) {
      try {
        await docker.getContainer(id).remove(opt({ force: true, v: false }, 60_000))
      } catch (err) {
        const e = toDockerError(err, 'container remove')
        // 404: already gone; 409 "removal already in progress" ends in the same state.
        if (e.statusCode === 404 || (e.statusCode === 409 && /in progress/i.test(e.message))) return
        throw e
      }
    },

    async inspectContainer (idOrName) {
      let info: Docker.ContainerInspectInfo
      try {
        info = await docker.getContainer(idOrName).inspect(opt())
      } catch (err) {
        const e = toDockerError(err, 'container inspect')
        if (e.statusCode === 404) return null
        throw e
      }
      return {
        id: info.Id,
        name: info.Name.replace(/^\//, ''),
        running: info.State.Running === true && info.State.Restarting !== true,
        labels: info.Config.Labels ?? {},
        imageId: info.Image,
        env: info.Config.Env ?? [],
        mounts: (info.HostConfig.Mounts ?? []).map(m => ({ type: m.Type, source: m.Source, target: m.Target, readOnly: m.ReadOnly === true })),
        networkMode: info.HostConfig.NetworkMode ?? '',
        addresses: Object.fromEntries(Object.entries(info.NetworkSettings?.Networks ?? {})
          .filter(([, n]) => typeof n.IPAddress === 'string' && n.IPAddress !== '').map(([k, n]) => [k, n.IPAddress])),
        memory: info.HostConfig.Memory ?? 0,
        nanoCpus: info.HostConfig.NanoCpus ?? 0,
        pidsLimit: info.HostConfig.PidsLimit ?? 0,
        tmpfs: (info.HostConfig as { Tmpfs?: Record<string, string> | null }).Tmpfs ?? {},
        storageSize: (info.HostConfig as { StorageOpt?: Record<string, string> | null }).StorageOpt?.size ?? '',
        oomKilled: info.State.OOMKilled === true
      }
    },

    async listContainers (labelFilters) {
      const list = await call('container list', async () => await docker.listContainers(opt({ all: true, filters: { label: labelFilters } })))
      return list.map(c => ({
        id: c.Id,
        name: (c.Names[0] ?? '').replace(/^\//, ''),
        running: c.State === 'running',
        labels: c.Labels ?? {}
      }))
    },

    async createVolume (name, labels) {
      await call(`volume create ${name}`, async () => await docker.createVolume(opt({ Name: name, Labels: labels })))
    },

    async listVolumes (labelFilters) {
      const res = await call('volume list', async () => await docker.listVolumes(opt({ filters: { label: labelFilters } })))
      return (res.Volumes ?? []).map(v => ({ name: v.Name, labels: v.Labels ?? {}, createdAt: (v as { CreatedAt?: string }).CreatedAt }))
    },

    async removeVolume (name) {
      try {
        await docker.getVolume(name).remove(opt())
      } catch (err) {
        const e = toDockerError(err, `volume remove ${name}`)
        if (e.statusCode === 404) return
        throw e
      }
    },

    async listNetworks (labelFilters) {
      const list = await call('network list', async () => await docker.listNetworks(opt({ filters: { label: labelFilters } })))
      return list.map(n => ({ id: n.Id, name: n.Name }))
    },

    async removeNetwork (idOrName) {
      try {
        await docker.getNetwork(idOrName).remove(opt())
      } catch (err) {
        const e = toDockerError(err, 'network remove')
        if (e.statusCode === 404) return
        throw e
      }
    },

    async exec (containerId, spec) {
      const exec = await call('exec create', async () => await docker.getContainer(containerId).exec({
        Cmd: spec.argv,
        User: spec.user,
        WorkingDir: spec.cwd,
        Env: spec.env,
        AttachStdin: spec.stdin === true,
        AttachStdout: true,
        AttachStderr: true,
        Tty: spec.tty === true,
        abortSignal: signal()
      }))
      const socket = await call('exec start', async () => await exec.start({ hijack: true, stdin: spec.stdin === true, Detach: false, Tty: spec.tty === true }))
      return { id: exec.id, socket: socket as unknown as Duplex }
    },

    async execInspect (execId) {
      const info = await call('exec inspect', async () => await docker.getExec(execId).inspect(opt()))
      return { running: info.Running, exitCode: info.Running ? null : (info.ExitCode ?? null), pid: info.Pid }
    },

    async execResize (execId, cols, rows) {
      await call('exec resize', async () => await docker.getExec(execId).resize({ w: cols, h: rows } as {}))
    },

    async putFile (containerId, path, content, mode, uid, gid) {
      const dir = path.slice(0, path.lastIndexOf('/')) || '/'
      const archive = await tarOneFile(path, content, mode, uid, gid)
      await call(`put archive ${dir}`, async () => await docker.getContainer(containerId).putArchive(archive, { path: dir, abortSignal: signal(120_000) }))
    },

    close () {
      agent?.destroy()
    },

    async renameContainer (id, name) {
      try {
        await docker.getContainer(id).rename(opt({ name }))
        return true
      } catch (err) {
        const e = toDockerError(err, 'container rename')
        if (e.statusCode === 409) return 'conflict'
        if (e.statusCode === 404) return false
        throw e
      }
    }
  }
}
