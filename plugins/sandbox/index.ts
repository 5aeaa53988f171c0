import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import { SandboxOptions } from './schemas.js'
import { clockWith, systemClock } from './clock.js'
import { createSandboxService } from './service.js'

export type { SandboxOptions } from './schemas.js'

/**
 * The engine-neutral sandbox core (types.ts; docs/contract.md#sandbox; docs/contract.md#engines). Decorates `fastify.sandbox`
 * over the engine an engine plugin decorated as `fastify.sandboxEngine` (sandbox-docker today), adds
 * the engine's readiness check (Docker: `docker`, fields docker, image, data_dir), connects at boot
 * (ensures the isolated network, re-adopts labelled sandboxes, fills the warm pool) and runs the
 * reaper. Boot never fails because the engine is down. On close, timers stop, exec streams end and the
 * engine is closed; sandboxes keep running and are re-adopted.
 */
const sandbox: FastifyPluginAsync<SandboxOptions> = async (fastify, raw) => {
  const { now, memoryAvailable, ...rest } = raw
  const opts = parseOptions(SandboxOptions, rest, 'sandbox')
  const engine = fastify.sandboxEngine
  const service = createSandboxService({
    ...opts,
    ...(memoryAvailable !== undefined && { memoryAvailable }),
    storage: fastify.chatStorage
  }, engine, fastify.log.child({ plugin: 'sandbox', engine: engine.name }), now === undefined ? systemClock : clockWith(now))
  fastify.decorate('sandbox', service)
  // Pool sandboxes wait for every plugin's environment contributor (docs/engine.md#environment).
  const releasePool = service.holdPool()
  fastify.addHook('onReady', async () => { releasePool() })
  fastify.readiness.addCheck(engine.name, async () => await service.readiness())
  fastify.addHook('onClose', async () => { await service.close() })
  await service.start()
}

export default fp(sandbox, { name: 'sandbox', fastify: '5.x', dependencies: ['chat-storage'], decorators: { fastify: ['readiness', 'sandboxEngine', 'chatStorage'] } })
