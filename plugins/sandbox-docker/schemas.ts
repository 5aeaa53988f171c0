import Type, { type Static } from 'typebox'

/** Options of the Docker engine plugin, fed from AppConfig by fastify.config.ts (docs/contract.md#routes-and-settings). */
export const SandboxDockerOptions = Type.Object({
  dockerHost: Type.Optional(Type.String({ default: 'unix:///var/run/docker.sock', description: 'DOCKER_HOST || DOCKER_SOCKET: unix://, tcp://, http(s)://' }))
})
export type SandboxDockerOptions = Static<typeof SandboxDockerOptions>
