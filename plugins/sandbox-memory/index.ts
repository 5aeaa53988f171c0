import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { createMemoryEngine, type MemoryEngineOptions } from './memory-engine.js'

export type { MemoryEngineOptions } from './memory-engine.js'

/**
 * The in-memory engine of the sandbox core (docs/engine.md): decorates `fastify.sandboxEngine` with
 * an engine that keeps sandboxes in this process (memory-engine.ts). For unit tests and for trying
 * the server without a container runtime; nothing it runs is isolated from anything.
 */
const sandboxMemory: FastifyPluginAsync<MemoryEngineOptions> = async (fastify, opts) => {
  fastify.decorate('sandboxEngine', createMemoryEngine(opts))
}

export default fp(sandboxMemory, { name: 'sandbox-memory', fastify: '5.x' })
