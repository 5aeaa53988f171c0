import type Docker from 'dockerode'
import type { Socket } from 'node:net'
import { AGENT_MOUNT, RunDirs, TOKEN } from './agent-run-dir.js'
import { AgentSockets, type AgentSocketLog } from './agent-socket.js'
import { EgressSockets } from './egress-socket.js'
import type { AdapterContext } from './docker-context.js'
import type { HostMount } from '../../core/storage-layout.js'
import type { SandboxEngine, SandboxSpec } from '../sandbox/types.js'

/*
 * The agent socket wired into the Docker engine (docs/engine.md#the-agent-socket): a sandbox created from
 * an image that says its entrypoint starts the agent (label cubicle.agent-socket=1) gets a run
 * directory, labelled with its random token and bind-mounted read-only at /run/cubicle-agent; start
 * opens the window for its fresh agent, exec waits for that window to close, remove deletes the
 * directory, and agentChannel hands the core the authenticated connection. The mount is the engine's
 * own: the plain engine's inspect leaves it out of the storage it reports, so drift detection compares only what the core asked for. Any
 * failure here leaves the sandbox to the exec path, never failing the call.
 *
 * With `egress` (SANDBOX_EGRESS_SOCKET) the engine also offers egress over the same directory
 * (serveEgress, egress-socket.ts, docs/network.md#egress-over-the-agent-socket): `egress.sock` is listened on
 * before each start and for every running sandbox found, and its connections go to the core with the
 * sandbox's id. The run directory is then prepared even after agents stopped coming through their socket
 * (the agent started over exec relays too).
 */

/** Container label: the sandbox's run directory token. */
export const RUN_LABEL = 'cubicle.agent-run'
/** Image label: its entrypoint starts the agent with --connect when /run/cubicle-agent exists. */
export const IMAGE_LABEL = 'cubicle.agent-socket'
/** Image label: its agent relays the sandbox's egress (docs/network.md#egress-over-the-agent-socket). */
export const RELAY_LABEL = 'cubicle.egress-relay'
const IMAGE_CACHE_MS = 10_000
/** How often at most orphaned run directories (sandboxes removed behind the server's back) are swept. */
const SWEEP_EVERY_MS = 10 * 60_000

export interface AgentSocketOptions { runDir: string, runDirHost: string, log: AgentSocketLog, /** offer egress over the run directory (SANDBOX_EGRESS_SOCKET) */ egress?: boolean }

/**
 * What the wrapper needs of the plain engine: a start that says whether the sandbox was stopped before, and
 * a create that adds a mount of the engine's own to the spec's storage.
 */
export interface StartCall {
  startFresh: (id: string) => Promise<boolean>
  createWith: (spec: SandboxSpec, mounts: HostMount[]) => Promise<{ id: string } | 'conflict'>
}

export function withAgentSocket<E extends SandboxEngine> (engine: E, start: StartCall, ctx: AdapterContext, o: AgentSocketOptions): E {
  const { docker, run } = ctx
  const sockets = new AgentSockets(new RunDirs(o.runDir, o.runDirHost), o.log)
  const egress = new EgressSockets(sockets.dirs, o.log)
  let warnedImage = false
  const images = new Map<string, { at: number, socket: boolean, relay: boolean }>()
  const creating = new Set<string>()
  let swept = 0

  async function imageLabels (image: string): Promise<{ socket: boolean, relay: boolean }> {
    const hit = images.get(image)
    if (hit !== undefined && Date.now() - hit.at < IMAGE_CACHE_MS) return hit
    const info = await run('read', 'image inspect', async s => await docker.getImage(image).inspect({ abortSignal: s } as {}) as Docker.ImageInspectInfo, { retry: true, dedupKey: `image\u0000${image}` })
    const labels = info.Config?.Labels ?? {}
    const found = { at: Date.now(), socket: labels[IMAGE_LABEL] === '1', relay: labels[RELAY_LABEL] === '1' }
    images.set(image, found)
    return found
  }

  /** Run directories of sandboxes that no longer exist (any server's sandbox with a token counts as live). */
  async function sweep (): Promise<void> {
    if (Date.now() - swept < SWEEP_EVERY_MS) return
    swept = Date.now()
    const all = await engine.list([RUN_LABEL])
    const live = new Set([...sockets.tokens(), ...creating, ...all.map(c => c.labels[RUN_LABEL] ?? '')])
    const n = await sockets.dirs.sweep(live)
    if (n > 0) o.log.debug({ removed: n }, 'removed orphaned agent run directories')
  }

  function note (id: string, labels: Record<string, string>, running: boolean): void {
    const token = labels[RUN_LABEL]
    if (token === undefined || !TOKEN.test(token)) return
    const s = sockets.note(id, token)
    // A running sandbox this server has not listened for (a restart): its agent is retrying already.
    if (running) {
      void sockets.watch(s).catch(() => {})
      if (egress.serving) void egress.listen(id, token)
    }
  }

  async function slotOf (id: string): Promise<ReturnType<AgentSockets['known']>> {
    const s = sockets.known(id)
    if (s !== undefined) return s
    const d = await engine.inspect(id)
    if (d !== null) note(d.id, d.labels, false)
    return sockets.known(id) ?? (d === null ? undefined : sockets.known(d.id))
  }

  return {
    ...engine,

    async create (spec) {
      let token: string | null = null
      let source = ''
      if (!sockets.disabled || egress.serving) {
        try {
          const image = await imageLabels(spec.image)
          if (image.socket) {
            token = RunDirs.newToken()
            creating.add(token)
            source = await sockets.dirs.prepare(token)
          }
          if (egress.serving && spec.network === 'none' && !image.relay && !warnedImage) {
            warnedImage = true
            o.log.warn({ image: spec.image }, 'the sandbox image\'s agent does not relay egress (label cubicle.egress-relay): its sandboxes have no way out; rebuild the image or set SANDBOX_EGRESS_SOCKET=false')
          }
        } catch (err) {
          o.log.warn({ err }, 'cannot prepare the sandbox agent socket; its agent runs over exec')
          if (token !== null) { creating.delete(token); await sockets.dirs.remove(token).catch(() => {}) }
          token = null
        }
      }
      if (token === null) return await engine.create(spec)
      try {
        const r = await start.createWith({ ...spec, labels: { ...spec.labels, [RUN_LABEL]: token } }, [{ type: 'bind', source, target: AGENT_MOUNT, readOnly: true }])
        if (r === 'conflict') await sockets.dirs.remove(token)
        else sockets.note(r.id, token)
        return r
      } catch (err) {
        await sockets.dirs.remove(token).catch(() => {})
        throw err
      } finally {
        creating.delete(token)
        void sweep().catch(err => { o.log.debug({ err }, 'sweeping agent run directories failed') })
      }
    },

    async start (id) {
      const s = await slotOf(id)
      if (s === undefined) { await start.startFresh(id); return }
      if (egress.serving) await egress.listen(s.id, s.token)
      await sockets.beforeStart(s)
      let started = false
      try {
        started = await start.startFresh(id)
      } finally { sockets.afterStart(s, started) }
    },

    async exec (id, spec) {
      await sockets.beforeExec(id)
      return await engine.exec(id, spec)
    },

    async remove (idOrName) {
      // The core removes a chat's sandbox by its name: the slot and the egress socket are kept by container id,
      // so a name is looked up first (else both stayed listening and the run directory was never swept).
      const id = sockets.known(idOrName) !== undefined ? idOrName : (await engine.inspect(idOrName).catch(() => null))?.id ?? idOrName
      await engine.remove(idOrName)
      egress.stop(id)
      await sockets.forget(id).catch(err => { o.log.warn({ err }, 'removing an agent run directory failed') })
    },

    async inspect (idOrName) {
      const d = await engine.inspect(idOrName)
      if (d === null) return null
      note(d.id, d.labels, d.running)
      return d
    },

    async list (labelFilters) {
      const all = await engine.list(labelFilters)
      for (const c of all) note(c.id, c.labels, c.running)
      return all
    },

    async agentChannel (id): Promise<Socket | null> {
      const s = await slotOf(id)
      return s === undefined ? null : await sockets.channel(s)
    },

    ...(o.egress === true
      ? {
          serveEgress (handler: (id: string, socket: Socket) => void): void {
            egress.serve(handler)
            // Sandboxes listed before (the core re-adopts at boot, before the egress plugin registers): their
            // agents relay already. A stopped one's socket answers no one until it starts.
            for (const s of sockets.all()) void egress.listen(s.id, s.token)
          }
        }
      : {}),

    close () {
      egress.close()
      sockets.close()
      engine.close()
    }
  }
}
