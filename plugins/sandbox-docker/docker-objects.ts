import type Docker from 'dockerode'
import { DockerError } from './docker-error.js'
import type { AdapterContext } from './docker-context.js'
import { applyFirewall } from './docker-firewall.js'
import type { EngineNetwork, SandboxEngine } from '../sandbox/types.js'

/*
 * The adapter's calls on images, networks and volumes (docker-client.ts assembles the client).
 */

type ObjectCalls = Pick<SandboxEngine, 'imageId' | 'ensureNetwork' | 'createVolume' | 'listVolumes' | 'removeVolume' | 'listNetworks' | 'removeNetwork'> & Required<Pick<SandboxEngine, 'restrictToProxy'>>

interface RawNetwork { Id: string, Internal?: boolean, Labels?: Record<string, string> | null, Options?: Record<string, string> | null, IPAM?: { Config?: Array<{ Gateway?: string, Subnet?: string }> } }

/** Docker's bridge lets containers on one network reach each other unless this option is 'false'. */
const ICC = 'com.docker.network.bridge.enable_icc'

/** The contract's view of a network: the host interface stays Docker's (the firewall's) business. */
function neutral (n: EngineNetwork & { bridge: string }): EngineNetwork {
  const { bridge: _bridge, ...rest } = n
  return rest
}

export function objectCalls ({ docker, run }: AdapterContext): ObjectCalls {
  const describeNetwork = async (name: string): Promise<(EngineNetwork & { bridge: string }) | null> => {
    try {
      const n = await run('read', `network inspect ${name}`, async () => await docker.getNetwork(name).inspect(), { retry: true }) as unknown as RawNetwork
      const v4 = (n.IPAM?.Config ?? []).find(c => c.Subnet !== undefined && !c.Subnet.includes(':'))
      return {
        id: n.Id,
        internal: n.Internal === true,
        isolated: n.Options?.[ICC] === 'false',
        isolationSetting: `${ICC}=false`,
        labels: n.Labels ?? {},
        gateway: v4?.Gateway ?? null,
        subnet: v4?.Subnet ?? null,
        bridge: n.Options?.['com.docker.network.bridge.name'] ?? `br-${n.Id.slice(0, 12)}`
      }
    } catch (err) {
      if ((err as DockerError).statusCode === 404) return null
      throw err
    }
  }

  return {
    async imageId (image) {
      try {
        const info = await run('read', `image inspect ${image}`, async s => await docker.getImage(image).inspect({ abortSignal: s } as {}), { retry: true, dedupKey: `image\u0000${image}` })
        return info.Id
      } catch (err) {
        if ((err as DockerError).statusCode === 404) return null
        throw err
      }
    },

    async ensureNetwork (name, labels) {
      const existing = await describeNetwork(name)
      if (existing !== null) return { ...neutral(existing), result: 'exists' }
      try {
        await run('lifecycle', `network create ${name}`, async s => await docker.createNetwork({
          Name: name,
          Driver: 'bridge',
          CheckDuplicate: true,
          Internal: true,
          Attachable: false,
          Labels: labels,
          Options: { [ICC]: 'false' },
          abortSignal: s
        } as Docker.NetworkCreateOptions), { retry: true })
      } catch (err) {
        if ((err as DockerError).statusCode !== 409) throw err
      }
      const created = await describeNetwork(name)
      if (created === null) throw new DockerError(`network ${name} vanished after creation`, 404, false)
      return { ...neutral(created), result: 'created' }
    },

    // The bridge's INPUT rules (docker-firewall.ts): the host reachable only on the proxy port.
    async restrictToProxy (name, port) {
      const net = await describeNetwork(name)
      if (net === null) throw new DockerError(`network ${name} not found`, 404, false, undefined, false, 'network-missing')
      if (net.gateway === null) throw new DockerError(`network ${name} has no IPv4 gateway`, 409, false)
      return await applyFirewall({ gateway: net.gateway, bridge: net.bridge }, port)
    },

    async createVolume (name, labels) {
      await run('lifecycle', `volume create ${name}`, async s => await docker.createVolume({ Name: name, Labels: labels, abortSignal: s } as {}), { retry: true })
    },

    async listVolumes (labelFilters) {
      const res = await run('read', 'volume list', async s => await docker.listVolumes({ filters: { label: labelFilters }, abortSignal: s } as {}), { retry: true })
      return (res.Volumes ?? []).map(v => ({ name: v.Name, labels: v.Labels ?? {}, createdAt: (v as { CreatedAt?: string }).CreatedAt }))
    },

    async removeVolume (name) {
      try {
        await run('lifecycle', `volume remove ${name}`, async s => await docker.getVolume(name).remove({ abortSignal: s } as {}), { retry: true })
      } catch (err) {
        if ((err as DockerError).statusCode === 404) return
        throw err
      }
    },

    async listNetworks (labelFilters) {
      const list = await run('read', 'network list', async s => await docker.listNetworks({ filters: { label: labelFilters }, abortSignal: s } as {}), { retry: true })
      return list.map(n => ({ id: n.Id, name: n.Name }))
    },

    async removeNetwork (idOrName) {
      try {
        await run('lifecycle', 'network remove', async s => await docker.getNetwork(idOrName).remove({ abortSignal: s } as {}), { retry: true })
      } catch (err) {
        if ((err as DockerError).statusCode === 404) return
        throw err
      }
    }
  }
}
