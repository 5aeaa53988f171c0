import Type, { type Static } from 'typebox'

/** Options of the Docker engine plugin, fed from AppConfig by fastify.config.ts (docs/contract.md#routes-and-settings). */
export const SandboxDockerOptions = Type.Object({
  dockerHost: Type.Optional(Type.String({ default: 'unix:///var/run/docker.sock', description: 'DOCKER_HOST || DOCKER_SOCKET: unix://, tcp://, http(s)://' })),
  dataDir: Type.Optional(Type.String({ default: '', description: 'DATA_DIR: the chats\' and pool slots\' uploads and outputs below it (docs/engine.md#storage); empty = the engine creates no sandbox' })),
  dataDirHost: Type.Optional(Type.String({ default: '', description: 'DATA_DIR_HOST: the same directory as the daemon sees it (the bind mounts\' sources); empty = dataDir' })),
  skillsDirHost: Type.Optional(Type.String({ default: '', description: 'SKILLS_DIR_HOST, mounted read-only at /mnt/skills when set' })),
  agentRunDir: Type.Optional(Type.String({ default: '', description: 'where the server keeps the agent sockets\' run directories (<DATA_DIR>/run with SANDBOX_AGENT and SANDBOX_AGENT_SOCKET); empty = no agent socket' })),
  agentRunDirHost: Type.Optional(Type.String({ default: '', description: 'the same directory as the daemon sees it (<DATA_DIR_HOST>/run); empty = agentRunDir' })),
  egressSocket: Type.Optional(Type.Boolean({ default: true, description: 'SANDBOX_EGRESS_SOCKET: offer egress over the agent socket\'s run directories (needs agentRunDir): sandboxes without a network interface' }))
})
export type SandboxDockerOptions = Static<typeof SandboxDockerOptions>
