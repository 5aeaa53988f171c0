import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import { createDockerEngine } from './docker-client.js'
import type { SandboxEngine } from './engine-types.js'
import { SandboxDockerOptions } from './schemas.js'
import { createSandboxService } from './service.js'

export type { SandboxDockerOptions } from './schemas.js'
export { sandboxEnvFromConfig } from './env.js'

/**
 * The Docker driver of the sandbox contract (types.ts; surface.md §5). Decorates `fastify.sandbox`,
 * adds the `docker` readiness check (fields docker, image, data_dir), connects at boot (ensures the
 * ICC-off network, re-adopts labelled containers) and runs the reaper. Boot never fails because Docker
 * is down. On close, timers stop and exec streams end; sandboxes keep running and are re-adopted.
 *
 * `client` (not an option of the manifest) lets tests wrap the Docker adapter.
 */
const sandboxDocker: FastifyPluginAsync<SandboxDockerOptions & { client?: SandboxEngine }> = async (fastify, raw) => {
  const { now, client, ...rest } = raw
  const opts = parseOptions(SandboxDockerOptions, rest, 'sandbox-docker')
  const docker = client ?? createDockerEngine(opts.dockerHost)
  const service = createSandboxService({
    ...opts,
    dataDirHost: opts.dataDirHost.trim() || opts.dataDir,
    now: now ?? Date.now
  }, docker, fastify.log.child({ plugin: 'sandbox-docker' }))
  fastify.decorate('sandbox', service)
  fastify.readiness.addCheck('docker', async () => await service.readiness())
  fastify.addHook('onClose', async () => { await service.close() })
  await service.start()
}

export default fp(sandboxDocker, { name: 'sandbox-docker', fastify: '5.x', decorators: { fastify: ['readiness'] } })
