import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import type { SandboxEngine } from '../sandbox/types.js'
import { createDockerEngine, type DockerEngine, type DockerStorage } from './docker-client.js'
import { SandboxDockerOptions } from './schemas.js'

export type { SandboxDockerOptions } from './schemas.js'

/**
 * The Docker engine of the sandbox core (docs/contract.md#engines): decorates `fastify.sandboxEngine` with the
 * SandboxEngine of plugins/sandbox/types.ts over dockerode (docker-client.ts). The `sandbox` plugin,
 * registered after it, owns the lifecycle and closes the engine when it closes. Building the engine
 * connects to nothing: boot never fails because Docker is down.
 *
 * The engine owns where a sandbox's storage lives on its host (docs/engine.md#storage): the chats' areas below
 * DATA_DIR_HOST, the skills at SKILLS_DIR_HOST. `client` (not an option of the manifest) lets tests wrap the
 * engine; a wrapped Docker engine is given the same storage location.
 */
const sandboxDocker: FastifyPluginAsync<SandboxDockerOptions & { client?: SandboxEngine }> = async (fastify, raw) => {
  const { client, ...rest } = raw
  const opts = parseOptions(SandboxDockerOptions, rest, 'sandbox-docker')
  const runDir = opts.agentRunDir ?? ''
  const agentSocket = runDir === '' ? undefined : { runDir, runDirHost: opts.agentRunDirHost === '' || opts.agentRunDirHost === undefined ? runDir : opts.agentRunDirHost, log: fastify.log.child({ plugin: 'sandbox-docker' }), egress: opts.egressSocket !== false }
  const data = opts.dataDirHost.trim() || opts.dataDir.trim()
  const storage: DockerStorage | undefined = data === '' ? undefined : { data, skills: opts.skillsDirHost.trim(), local: opts.dataDir.trim() }
  if (client !== undefined && storage !== undefined) (client as Partial<DockerEngine>).useStorage?.(storage)
  fastify.decorate('sandboxEngine', client ?? createDockerEngine(opts.dockerHost, {}, agentSocket, storage))
}

export default fp(sandboxDocker, { name: 'sandbox-docker', fastify: '5.x' })
