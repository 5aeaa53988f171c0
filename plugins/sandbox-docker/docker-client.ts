import type Docker from 'dockerode'
import { Dockerode } from './dockerode.js'
import { adapterContext, DEFAULT_ENGINE_LIMITS, type EngineLimits } from './docker-context.js'
import { createAgent, parseDockerHost } from './docker-endpoint.js'
import { dockerCreateBody, tmpfsFromOptions } from './docker-create-body.js'
import { DockerError } from './docker-error.js'
import { execCalls } from './docker-exec-calls.js'
import { createMonitorClient } from './docker-monitor.js'
import { objectCalls } from './docker-objects.js'
import { leaseCalls } from './docker-lease.js'
import { appAddressCall } from './docker-address.js'
import { withAgentSocket, type AgentSocketOptions } from './docker-agent.js'
import { hostMounts, storageOfMounts, type HostMount, type HostRoots } from '../../core/storage-layout.js'
import { giveOutputsDir } from '../../core/area-owner.js'
import type { SandboxEngine, SandboxSpec } from '../sandbox/types.js'
import { AGENT_MOUNT } from './agent-run-dir.js'

/*
 * The Docker engine (engine-types.ts SandboxEngine): the only file that builds the dockerode client.
 * The container calls live here; docker-exec-calls.ts adds exec and file calls, docker-objects.ts
 * images, networks and volumes, docker-monitor.ts the resource and disk-usage reports, all over the
 * same client, docker-lease.ts the leases. Known statuses are absorbed (304 on start/stop, 404 on remove, 409 on create is
 * reported as a conflict), everything else becomes a DockerError that says whether the engine itself
 * is unreachable. Idle keep-alive sockets are unref'd by the agent, so an idle client never holds the
 * process open.
 */

export { DockerError, toDockerError, transient } from './docker-error.js'
export { DEFAULT_ENGINE_LIMITS, type EngineLimits } from './docker-context.js'

/** StorageOpt.size as bytes: 0 when none, -1 when not a plain byte count (it then never matches a spec). */
function quotaBytes (size: string | undefined): number {
  if (size === undefined || size === '') return 0
  return /^\d+$/.test(size) ? Number(size) : -1
}

/** IPv4 address per attached network (a stopped container has none). */
function networkAddresses (networks: Record<string, { IPAddress?: string }> | undefined): Record<string, string> {
  return Object.fromEntries(Object.entries(networks ?? {})
    .filter(([, n]) => typeof n.IPAddress === 'string' && n.IPAddress !== '').map(([k, n]) => [k, n.IPAddress as string]))
}

/** Resolves when the request succeeded or the engine answered one of `statuses` (the state asked for holds already). */
async function absorb (request: Promise<unknown>, statuses: number[]): Promise<void> {
  try { await request } catch (err) {
    if (statuses.includes((err as DockerError).statusCode ?? 0)) return
    throw err
  }
}

/**
 * Where the engine's host keeps a sandbox's storage (docs/engine.md#storage): `data` is DATA_DIR as the
 * daemon sees it (DATA_DIR_HOST: the chats' and pool slots' uploads and outputs below it), `skills` is
 * SKILLS_DIR_HOST ('' = no skills), `local` the same data directory as this server sees it (DATA_DIR: where
 * it gives a sandbox's outputs to the sandbox user; '' = it cannot).
 */
export type DockerStorage = HostRoots & { local?: string }

/** The Docker engine: the contract, plus where its storage lives (set by the plugin, also on an engine a test wrapped). */
export interface DockerEngine extends SandboxEngine {
  useStorage: (roots: DockerStorage) => void
}

/**
 * `limits` bounds how much work the engine gets at once (docker-context.ts; tests tighten them).
 * Every request is queued in its lane, bounded in time, and retried when idempotent and the engine
 * was merely busy. `storage`: where the chats' areas are on the daemon's host; without it (or a later
 * useStorage) a create fails, while every other call works (tests that only list and remove).
 */
export function createDockerEngine (host: string, limits: Partial<EngineLimits> = {}, agentSocket?: AgentSocketOptions, storage?: DockerStorage): DockerEngine {
  const endpoint = parseDockerHost(host)
  const agent = createAgent(endpoint)
  const docker = new Dockerode({ ...endpoint.docker, ...(agent === undefined ? {} : { agent }) } as Docker.DockerOptions)
  const ctx = adapterContext(docker, { ...DEFAULT_ENGINE_LIMITS, ...limits })
  const { run } = ctx
  const exec = execCalls(ctx)
  let roots: DockerStorage | null = storage ?? null

  /** Creates the container from the spec, its storage mapped to a volume and bind mounts, plus the engine's own `mounts`. */
  async function createWith (spec: SandboxSpec, mounts: HostMount[]): Promise<{ id: string } | 'conflict'> {
    if (roots === null) throw new DockerError('the Docker engine has no storage location (DATA_DIR_HOST): it cannot create a sandbox', 500, false)
    const config = dockerCreateBody(spec, [...hostMounts(spec.storage, roots), ...mounts])
    try {
      // A retried create whose first attempt went through answers 409: the caller adopts it.
      const c = await run('lifecycle', 'container create', async s => await docker.createContainer({ ...config, abortSignal: s } as Docker.ContainerCreateOptions), { retry: true })
      return { id: c.id }
    } catch (err) {
      if ((err as DockerError).statusCode === 409) return 'conflict'
      throw err
    }
  }

  /** Starts the container; false when it was running already (Docker's 304) or paused (then it is unpaused). */
  async function startFresh (id: string): Promise<boolean> {
    try {
      await run('lifecycle', 'container start', async s => await docker.getContainer(id).start({ abortSignal: s }), { retry: true })
      return true
    } catch (err) {
      const e = err as DockerError
      if (e.statusCode === 304) {
        // Already running; if it is paused after all (a full run once saw a start leave one paused), thaw it.
        if ((await engine.inspect(id))?.paused === true) await unpause(id)
        return false
      }
      // "cannot start a paused container, try unpause instead"
      if (e.statusCode === 409 && /paused/i.test(e.message)) { await unpause(id); return false }
      throw err
    }
  }

  /**
   * Before a kill or a forced remove: Docker 20.10 on cgroup v1 never finishes killing a paused
   * container (SIGKILL waits on the frozen processes; `docker rm -f` hung for 10 minutes, measured).
   * Unpausing one that is not paused, or missing, fails harmlessly.
   */
  async function thaw (id: string): Promise<void> {
    await run('lifecycle', 'container unpause', async s => await docker.getContainer(id).unpause({ abortSignal: s })).catch(() => {})
  }

  async function unpause (id: string): Promise<void> {
    try {
      // runc may refuse right after a pause with "cannot resume a running process": the cgroup's freeze
      // has not settled yet (seen in a full run: pause, a refused exec, then unpause). Docker still
      // reports the container paused, so asking again shortly after succeeds (at most 5 tries, 1.5 s).
      for (let attempt = 0; ; attempt++) {
        try {
          await run('lifecycle', 'container unpause', async s => await docker.getContainer(id).unpause({ abortSignal: s }), { retry: true })
          return
        } catch (err) {
          const e = err as DockerError
          if (attempt >= 4 || e.statusCode !== 500 || !/cannot resume a running process/i.test(e.message)) throw e
          await new Promise(resolve => setTimeout(resolve, 100 * 2 ** attempt))
        }
      }
    } catch (err) {
      const e = err as DockerError
      // "is not paused": fine when it runs (a retry, or never paused), not when it is stopped.
      if (e.statusCode !== 500 || !/not paused/i.test(e.message)) throw e
      if ((await engine.inspect(id))?.running === true) return
      throw new DockerError(`sandbox ${id} is not running`, 409, false, e, false, 'not-running')
    }
  }

  const engine: DockerEngine = {
    name: 'docker',
    label: { engine: 'the Docker engine', host: 'Docker' },
    ...createMonitorClient(docker, ctx.limits.callTimeoutMs),
    ...objectCalls(ctx),
    ...exec,
    ...leaseCalls(ctx, exec.putFile),

    async ping (timeoutMs = 2000) {
      // Unqueued: a health probe must not wait behind sandbox work.
      await run('read', 'ping', async s => await (docker.ping as (o: {}) => Promise<unknown>).call(docker, { abortSignal: s }), { ungated: true, timeoutMs })
    },

    async create (spec) {
      return await createWith(spec, [])
    },

    async start (id) {
      await startFresh(id)
    },

    async pause (id) {
      try {
        await run('lifecycle', 'container pause', async s => await docker.getContainer(id).pause({ abortSignal: s }), { retry: true })
      } catch (err) {
        const e = err as DockerError
        if (e.statusCode === 409 && /already paused/i.test(e.message)) return
        throw e
      }
    },

    unpause,

    async stop (id, graceSeconds) {
      try {
        await run('lifecycle', 'container stop', async s => await docker.getContainer(id).stop({ t: graceSeconds, abortSignal: s }),
          { retry: true, timeoutMs: (graceSeconds + 30) * 1000 })
        return true
      } catch (err) {
        const e = err as DockerError
        if (e.statusCode === 304) return true
        if (e.statusCode === 404) return false
        throw e
      }
    },

    async kill (id) {
      await thaw(id)
      await absorb(run('lifecycle', 'container kill', async s => await docker.getContainer(id).kill({ abortSignal: s }), { retry: true }), [404, 409, 304])
    },

    async remove (id) {
      await thaw(id)
      try {
        await run('lifecycle', 'container remove', async s => await docker.getContainer(id).remove({ force: true, v: false, abortSignal: s }), { retry: true, timeoutMs: 60_000 })
      } catch (err) {
        const e = err as DockerError
        // 404: already gone; 409 "removal already in progress" ends in the same state.
        if (e.statusCode === 404 || (e.statusCode === 409 && /in progress/i.test(e.message))) return
        throw e
      }
    },

    async inspect (idOrName) {
      let info: Docker.ContainerInspectInfo
      try {
        info = await run('read', 'container inspect', async s => await docker.getContainer(idOrName).inspect({ abortSignal: s }), { retry: true, dedupKey: `inspect\u0000${idOrName}` })
      } catch (err) {
        if ((err as DockerError).statusCode === 404) return null
        throw err
      }
      return {
        id: info.Id,
        name: info.Name.replace(/^\//, ''),
        running: info.State.Running === true && info.State.Restarting !== true && info.State.Paused !== true,
        paused: info.State.Paused === true,
        labels: info.Config.Labels ?? {},
        imageId: info.Image,
        env: info.Config.Env ?? [],
        // The agent socket's mount is the engine's own (docker-agent.ts): never part of what the core asked for.
        storage: storageOfMounts((info.HostConfig.Mounts ?? []).filter(m => m.Target !== AGENT_MOUNT)
          .map(m => ({ type: String(m.Type), source: m.Source, target: m.Target, readOnly: m.ReadOnly === true })), roots ?? { data: '', skills: '' }),
        network: info.HostConfig.NetworkMode ?? '',
        addresses: networkAddresses(info.NetworkSettings?.Networks),
        memory: info.HostConfig.Memory ?? 0,
        cpus: (info.HostConfig.NanoCpus ?? 0) / 1e9,
        pids: info.HostConfig.PidsLimit ?? 0,
        tmpfs: tmpfsFromOptions((info.HostConfig as { Tmpfs?: Record<string, string> | null }).Tmpfs),
        diskQuota: quotaBytes((info.HostConfig as { StorageOpt?: Record<string, string> | null }).StorageOpt?.size),
        oomKilled: info.State.OOMKilled === true
      }
    },

    appAddress: appAddressCall(ctx),

    async list (labelFilters) {
      const list = await run('read', 'container list', async s => await docker.listContainers({ all: true, filters: { label: labelFilters }, abortSignal: s }),
        { retry: true, dedupKey: `list\u0000${JSON.stringify(labelFilters)}` })
      return list.map(c => ({
        id: c.Id,
        name: (c.Names[0] ?? '').replace(/^\//, ''),
        running: c.State === 'running',
        paused: c.State === 'paused',
        labels: c.Labels ?? {},
        addresses: networkAddresses(c.NetworkSettings?.Networks)
      }))
    },

    // Docker cannot relabel a container: a claim is a rename, and the core keeps chat identity out of labels.
    labelsAtClaim: false,

    async claim (id, { name }) {
      try {
        // Not retried: a rename that went through answers 409 on a second attempt.
        await run('lifecycle', 'container rename', async s => await docker.getContainer(id).rename({ name, abortSignal: s }))
        return true
      } catch (err) {
        const e = err as DockerError
        if (e.statusCode === 409) return 'conflict'
        if (e.statusCode === 404) return false
        throw e
      }
    },

    useStorage (r) { roots = r },

    // The outputs bind mount's source belongs to the sandbox user (mode 0750): changed through the server's view of DATA_DIR.
    async giveOutputs (data, ids) {
      const local = roots?.local ?? ''
      if (local === '') return false
      return await giveOutputsDir(local, data, ids)
    },

    close () {
      agent?.destroy()
    }
  }
  // With a run directory: the in-sandbox agent is reached through a socket the engine listens on (docker-agent.ts).
  return agentSocket === undefined ? engine : withAgentSocket(engine, { startFresh, createWith }, ctx, agentSocket)
}
