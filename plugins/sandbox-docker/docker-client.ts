import Docker from 'dockerode'
import { adapterContext, CALL_TIMEOUT_MS } from './docker-context.js'
import { createAgent, parseDockerHost } from './docker-endpoint.js'
import { toDockerError } from './docker-error.js'
import { execCalls } from './docker-exec-calls.js'
import { createMonitorClient } from './docker-monitor.js'
import { objectCalls } from './docker-objects.js'
import type { DockerClient } from './docker-types.js'

/*
 * The file that builds the dockerode client: a narrow adapter with the calls the sandbox driver needs.
 * The container calls live here; docker-exec-calls.ts adds exec and file calls, docker-objects.ts
 * images, networks and volumes, docker-monitor.ts the resource and disk-usage reports, all over the
 * same client. Known statuses are absorbed (304 on start/stop, 404 on remove, 409 on create is
 * reported as a conflict), everything else becomes a DockerError that says whether the engine itself
 * is unreachable. Idle keep-alive sockets are unref'd by the agent, so an idle client never holds the
 * process open.
 */

export { DockerError, toDockerError } from './docker-error.js'
export type { ContainerDetails, ContainerSummary, DockerClient, ExecHandle, ExecSpec, ExecState, NetworkInfo, VolumeSummary } from './docker-types.js'

export function createDockerClient (host: string): DockerClient {
  const endpoint = parseDockerHost(host)
  const agent = createAgent(endpoint)
  const docker = new Docker({ ...endpoint.docker, ...(agent === undefined ? {} : { agent }) } as Docker.DockerOptions)
  const ctx = adapterContext(docker)
  const { opt, signal, call } = ctx

  return {
    ...createMonitorClient(docker, CALL_TIMEOUT_MS),
    ...objectCalls(ctx),
    ...execCalls(ctx),

    async ping (timeoutMs = 2000) {
      await call('ping', async () => await (docker.ping as (o: {}) => Promise<unknown>).call(docker, opt({}, timeoutMs)))
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

    close () {
      agent?.destroy()
    }
  }
}
