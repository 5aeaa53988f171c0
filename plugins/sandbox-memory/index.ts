import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import type { SandboxEngine } from '../sandbox/types.js'
import { createMemoryEngine, type MemoryEngineOptions } from './memory-engine.js'

export type { MemoryEngineOptions } from './memory-engine.js'

/**
 * The in-memory engine of the sandbox core (docs/engine.md): decorates `fastify.sandboxEngine` with
 * an engine that keeps sandboxes in this process (memory-engine.ts). For unit tests and for trying
 * the server without a container runtime; nothing it runs is isolated from anything. `client`: an
 * engine built by the caller (a test that reads the sandboxes' files).
 */
const sandboxMemory: FastifyPluginAsync<MemoryEngineOptions & { client?: SandboxEngine }> = async (fastify, opts) => {
  const { client, ...rest } = opts
  fastify.decorate('sandboxEngine', client ?? createMemoryEngine(rest))
}

export default fp(sandboxMemory, { name: 'sandbox-memory', fastify: '5.x' })
