import type Docker from 'dockerode'
import { DockerError, toDockerError } from './docker-error.js'
import type { AdapterContext } from './docker-context.js'
import type { DockerClient, NetworkInfo } from './docker-types.js'

/*
 * The adapter's calls on images, networks and volumes (docker-client.ts assembles the client).
 */

type ObjectCalls = Pick<DockerClient, 'imageId' | 'ensureNetwork' | 'createVolume' | 'listVolumes' | 'removeVolume' | 'listNetworks' | 'removeNetwork'>

interface RawNetwork { Id: string, Internal?: boolean, Options?: Record<string, string>, IPAM?: { Config?: Array<{ Gateway?: string, Subnet?: string }> } }

export function objectCalls ({ docker, opt, signal, call }: AdapterContext): ObjectCalls {
  const describeNetwork = async (name: string): Promise<NetworkInfo | null> => {
    try {
      const n = await docker.getNetwork(name).inspect() as unknown as RawNetwork
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

  return {
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
      const existing = await describeNetwork(name)
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
      const created = await describeNetwork(name)
      if (created === null) throw new DockerError(`network ${name} vanished after creation`, 404, false)
      return { ...created, result: 'created' }
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
    }
  }
}
