import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import type { SandboxEngine } from '../sandbox/types.js'
import { resolveConnection } from './kube-config.js'
import { createKubeEngine } from './kube-engine.js'
import { parseLabelPairs } from './kube-objects.js'
import { SandboxKubernetesOptions } from './schemas.js'

export type { SandboxKubernetesOptions } from './schemas.js'

/**
 * The Kubernetes engine of the sandbox core (docs/engine.md#kubernetes), selected by
 * `SANDBOX_ENGINE=kubernetes`: decorates `fastify.sandboxEngine` with one Pod per running sandbox, a
 * PersistentVolumeClaim per volume and a NetworkPolicy as the isolated network (kube-engine.ts). It
 * reads where the API is (and the credentials) at boot, and connects to nothing until the core asks.
 * `client`: an engine built by the caller (tests).
 */
const sandboxKubernetes: FastifyPluginAsync<SandboxKubernetesOptions & { client?: SandboxEngine }> = async (fastify, raw) => {
  const { client, ...rest } = raw
  if (client !== undefined) { fastify.decorate('sandboxEngine', client); return }
  const opts = parseOptions(SandboxKubernetesOptions, rest, 'sandbox-kubernetes')
  const connection = resolveConnection({ apiUrl: opts.apiUrl, namespace: opts.namespace })
  fastify.log.info({ server: connection.server, namespace: connection.namespace, from: connection.source }, 'Kubernetes engine')
  fastify.decorate('sandboxEngine', createKubeEngine({
    connection,
    pod: { uid: opts.uid ?? 1000, gid: opts.gid ?? 1000, runtimeClassName: opts.runtimeClassName, storageClassName: opts.storageClassName, volumeSize: opts.volumeSize ?? '10Gi' },
    server: { selector: parseLabelPairs(opts.serverSelector ?? ''), address: opts.serverAddress },
    maxStarting: opts.maxStarting ?? 8,
    shared: { claim: opts.sharedClaim ?? '', root: opts.dataDir ?? '/data', dataDir: opts.dataDir ?? '/data', skillsDir: opts.skillsDir ?? '' }
  }))
}

export default fp(sandboxKubernetes, { name: 'sandbox-kubernetes', fastify: '5.x' })
