import http from 'node:http'
import https from 'node:https'
import { inspect } from 'node:util'
import type Docker from 'dockerode'

/*
 * Where the engine is and how we connect to it: DOCKER_HOST parsing and the connection pool
 * (docker-client.ts is still the only file that calls dockerode).
 */

export interface Endpoint {
  docker: Docker.DockerOptions
  agent?: http.Agent
}

/** Parses DOCKER_HOST forms: unix:///path, /path, tcp://host:port, http(s)://host:port, ssh://user@host. */
export function parseDockerHost (host: string): Endpoint {
  const value = host.trim() === '' ? 'unix:///var/run/docker.sock' : host.trim()
  if (value.startsWith('unix://')) return { docker: { socketPath: value.slice('unix://'.length) || '/var/run/docker.sock' } }
  if (value.startsWith('/')) return { docker: { socketPath: value } }
  if (value.startsWith('npipe://')) return { docker: { socketPath: value.slice('npipe:'.length) } }
  const url = new URL(value.replace(/^tcp:\/\//, 'http://'))
  if (url.protocol === 'ssh:') {
    return { docker: { protocol: 'ssh', host: url.hostname, port: url.port === '' ? 22 : Number(url.port), username: url.username || undefined } }
  }
  const protocol = url.protocol === 'https:' ? 'https' : 'http'
  return { docker: { protocol, host: url.hostname, port: url.port === '' ? (protocol === 'https' ? 2376 : 2375) : Number(url.port) } }
}

/**
 * The keep-alive pool of an http(s) endpoint (ssh brings its own). docker-modem runs
 * util.inspect(requestOptions, { showHidden: true, depth: null }) for a debug line on every request,
 * debug enabled or not; the options hold this agent, and walking it (every socket, listener and
 * timer) grows with the connections in flight: with 50 sandboxes starting at once it took ~85% of
 * the server's CPU and stalled the event loop for seconds. So it prints as a name.
 */
export function createAgent (endpoint: Endpoint): http.Agent | undefined {
  if (endpoint.docker.protocol === 'ssh') return undefined
  const agent = endpoint.docker.protocol === 'https' ? new https.Agent({ keepAlive: true }) : new http.Agent({ keepAlive: true })
  Object.defineProperty(agent, inspect.custom, { value: () => 'DockerAgent' })
  return agent
}
