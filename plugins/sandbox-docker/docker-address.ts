import type Docker from 'dockerode'
import { networkInterfaces } from 'node:os'
import type { AdapterContext } from './docker-context.js'
import type { DockerError } from './docker-error.js'
import type { AppAddress } from '../sandbox/types.js'

/*
 * The Docker engine's appAddress (docs/engine.md#app-addresses): a running container's address on the
 * sandbox network, from the daemon's own inspect data. The server reaches it when the network's gateway is
 * an address of the server's own host (the server shares the Docker host's network namespace, as the
 * egress proxy needs): the bridge is then a directly connected link. The generation is the container id
 * and its endpoint id on the network: Docker makes a new endpoint at every start and every reconnect, and
 * an address is held by one endpoint at a time, so an equal generation read before and after a connect
 * means the address stayed this container's throughout.
 */

interface RawEndpoint { IPAddress?: string, EndpointID?: string, Gateway?: string }

/** How long the host's own addresses are trusted before they are read again. */
const LOCAL_TTL_MS = 10_000

/** Whether `address` is one of the host's interface addresses (read again every 10 s). */
export function localAddresses (read: () => ReturnType<typeof networkInterfaces> = networkInterfaces, now: () => number = Date.now): (address: string) => boolean {
  let at = -Infinity
  let local = new Set<string>()
  return address => {
    if (now() - at > LOCAL_TTL_MS) {
      local = new Set(Object.values(read()).flat().map(i => i?.address ?? '').filter(a => a !== ''))
      at = now()
    }
    return local.has(address)
  }
}

/** The address of a container's inspect data on `network`, or null (not running, paused, no endpoint, an unreachable network). */
export function addressOf (info: Pick<Docker.ContainerInspectInfo, 'Id' | 'State' | 'NetworkSettings'>, network: string, isLocal: (address: string) => boolean): AppAddress | null {
  const state = info.State
  if (state.Running !== true || state.Paused === true || state.Restarting === true) return null
  const ep = (info.NetworkSettings?.Networks as Record<string, RawEndpoint> | undefined)?.[network]
  const address = ep?.IPAddress ?? ''
  const endpoint = ep?.EndpointID ?? ''
  const gateway = ep?.Gateway ?? ''
  if (address === '' || endpoint === '' || gateway === '' || !isLocal(gateway)) return null
  return { address, generation: `${info.Id}/${endpoint}` }
}

/**
 * The engine call. Each call inspects afresh (never joined to an inspect already in flight: the answer
 * after a connect must have been read after it).
 */
export function appAddressCall (ctx: AdapterContext, isLocal: (address: string) => boolean = localAddresses()): (id: string, network: string) => Promise<AppAddress | null> {
  const { docker, run } = ctx
  return async (id, network) => {
    let info: Docker.ContainerInspectInfo
    try {
      info = await run('read', 'container inspect', async s => await docker.getContainer(id).inspect({ abortSignal: s }), { retry: true })
    } catch (err) {
      if ((err as DockerError).statusCode === 404) return null
      throw err
    }
    return addressOf(info, network, isLocal)
  }
}
