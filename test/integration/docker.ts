/*
 * The Docker gate of the integration tests. `dockerOrSkip()` answers { skip: false } when an engine
 * answers, else { skip: '<reason>' } for tap's `t.test(name, { skip }, …)`; with REQUIRE_DOCKER=1 a
 * missing engine is an error instead (CI must not silently skip). Talks to Docker through the
 * Docker engine (plugins/sandbox-docker/docker-client.ts is the only dockerode importer).
 */
import { mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildApp, entry } from '../../core/app.js'
import { loadConfig } from '../../core/config.js'
import sandboxDocker from '../../plugins/sandbox-docker/index.js'
import chatStorage from '../../plugins/chat-storage/index.js'
import sandbox from '../../plugins/sandbox/index.js'
import { createDockerEngine, type DockerStorage } from '../../plugins/sandbox-docker/docker-client.js'
import { removeFirewall } from '../../plugins/sandbox-docker/docker-firewall.js'
import type { SandboxEngine } from '../../plugins/sandbox/engine-types.js'
import type { SandboxOptions } from '../../plugins/sandbox/schemas.js'
import type { CoreSandboxService } from '../../plugins/sandbox/service.js'

import { refuseInUnitTier } from '../fixtures/tier.js'

refuseInUnitTier('test/integration/docker.ts (Docker)')

export const DOCKER_HOST = process.env.DOCKER_HOST ?? process.env.DOCKER_SOCKET ?? 'unix:///var/run/docker.sock'
export const TEST_IMAGE = process.env.DOCKER_IMAGE ?? 'computer-use-sandbox:latest'

let cached: Promise<{ skip: string | false }> | undefined

export async function dockerOrSkip (opts: { image?: boolean } = { image: true }): Promise<{ skip: string | false }> {
  cached ??= (async () => {
    const client = createDockerEngine(DOCKER_HOST)
    try {
      await client.ping(3000)
    } catch (err) {
      const reason = `no Docker engine answers at ${DOCKER_HOST} (${err instanceof Error ? err.message : String(err)})`
      if (process.env.REQUIRE_DOCKER === '1') throw new Error(`REQUIRE_DOCKER=1: ${reason}`)
      return { skip: reason }
    } finally { client.close() }
    return { skip: false as const }
  })()
  const base = await cached
  if (base.skip !== false || opts.image === false) return base
  const client = createDockerEngine(DOCKER_HOST)
  try {
    if (await client.imageId(TEST_IMAGE) === null) {
      const reason = `sandbox image ${TEST_IMAGE} is missing (npm run sandbox:build)`
      if (process.env.REQUIRE_DOCKER === '1') throw new Error(`REQUIRE_DOCKER=1: ${reason}`)
      return { skip: reason }
    }
  } finally { client.close() }
  return base
}

/** A client for tests (close it in teardown); `storage`: where sandboxes it creates find their data areas. */
export function testDockerClient (storage?: DockerStorage): SandboxEngine {
  return createDockerEngine(DOCKER_HOST, {}, undefined, storage)
}

/**
 * Removes every container, volume and network labelled `cu.prefix=<prefix>` (test cleanup, run
 * before and after a test file). Returns how many objects were removed.
 */
export async function removeByPrefix (prefix: string): Promise<number> {
  const client = createDockerEngine(DOCKER_HOST)
  const filter = [`cu.prefix=${prefix}`]
  let n = 0
  try {
    const containers = await client.list(filter)
    await Promise.all(containers.map(async c => { await client.remove(c.id); n++ }))
    const volumes = await client.listVolumes(filter)
    await Promise.all(volumes.map(async v => { await client.removeVolume(v.name); n++ }))
    const networks = await client.listNetworks(filter)
    for (const net of networks) {
      // The egress firewall's chain stays when a server stops (docs/network.md): the prefix's own goes with its network.
      await removeFirewall(`br-${net.id.slice(0, 12)}`)
      await client.removeNetwork(net.id); n++
    }
  } finally { client.close() }
  return n
}

/**
 * A chat's containers (any state): carrying `cu.chat-key=<key>` or named `{prefix}-sbx-{key}` (Docker
 * cannot label a claimed pool sandbox, so no sandbox carries the chat's key there), e.g. to prove there is exactly one.
 */
export async function containersOfChat (prefix: string, key: string): Promise<Array<{ id: string, name: string, running: boolean }>> {
  const client = createDockerEngine(DOCKER_HOST)
  try {
    return (await client.list([`cu.prefix=${prefix}`])).filter(c => c.labels['cu.chat-key'] === key || c.name === `${prefix}-sbx-${key}`)
  } finally { client.close() }
}

/** The host interface of a sandbox network (Docker's bridge name: the engine's business, the firewall tests need it). */
export async function bridgeOf (networkName: string): Promise<string> {
  const client = createDockerEngine(DOCKER_HOST)
  try {
    const n = (await client.listNetworks([])).find(x => x.name === networkName)
    if (n === undefined) throw new Error(`network ${networkName} not found`)
    return `br-${n.id.slice(0, 12)}`
  } finally { client.close() }
}

/** Removes the egress firewall rules (plugins/sandbox-docker/docker-firewall.ts) of a sandbox network that still exists. */
export async function removeNetworkFirewall (networkName: string): Promise<void> {
  await removeFirewall(await bridgeOf(networkName))
}

/** A chat's home volume (by label or its deterministic name `{prefix}-home-{key}`). */
export async function volumesOfChat (prefix: string, key: string): Promise<string[]> {
  const client = createDockerEngine(DOCKER_HOST)
  try {
    return (await client.listVolumes([`cu.prefix=${prefix}`])).filter(v => v.labels['cu.chat-key'] === key || v.name === `${prefix}-home-${key}`).map(v => v.name)
  } finally { client.close() }
}

export interface SandboxApp {
  app: FastifyInstance
  /** the driver itself (reap(), purge(), bootTime) */
  service: CoreSandboxService
  dataDir: string
  prefix: string
}

/**
 * An app with only the sandbox plugins (the Docker engine and the core), on its own prefix and temp
 * DATA_DIR. Closing is the caller's business when it wants to simulate a restart; otherwise teardown
 * closes it. Call `cleanupPrefix(t, prefix)` once per file to remove the Docker objects and data at the end.
 * `client` replaces the Docker engine (tests wrap it, see wrapClient); `dockerHost` points it elsewhere.
 */
export async function buildSandboxApp (t: Test, prefix: string, options: Partial<SandboxOptions> & { client?: SandboxEngine, dockerHost?: string } = {}, dataDir?: string): Promise<SandboxApp> {
  const dir = dataDir ?? await mkdtemp(join(tmpdir(), `${prefix}-data-`))
  const config = loadConfig({ DOCKER_IMAGE: TEST_IMAGE, LOG_LEVEL: 'silent', DATA_DIR: dir, SANDBOX_PREFIX: prefix })
  const { client, dockerHost, ...core } = options
  const app = await buildApp(config, [entry(chatStorage, { dataDir: dir }), entry(sandboxDocker, {
    dockerHost: dockerHost ?? DOCKER_HOST,
    dataDir: dir,
    ...(client !== undefined && { client })
  }), entry(sandbox, {
    image: TEST_IMAGE,
    prefix,
    dataDir: dir,
    memLimit: 512 * 1024 * 1024,
    // No warm pool unless a test asks (sandbox-pool.test.ts): these files count containers and measure
    // the create path, and a pool would add containers of its own.
    poolSize: 0,
    ...core
  })], { logger: process.env.TEST_LOG === '1' ? { level: 'debug' } : false })
  t.teardown(async () => { await app.close() })
  await app.ready()
  return { app, service: app.sandbox as CoreSandboxService, dataDir: dir, prefix }
}

/** Removes the prefix's containers, volumes and networks before the file runs and after it ends. */
export async function cleanupPrefix (t: Test, prefix: string): Promise<void> {
  const clean = async (): Promise<void> => {
    await removeByPrefix(prefix)
    for (const name of await readdir(tmpdir())) {
      if (name.startsWith(`${prefix}-data-`)) await rm(join(tmpdir(), name), { recursive: true, force: true })
    }
  }
  await clean()
  t.teardown(clean)
}

/** Wraps a real client so tests can intercept single calls. */
export function wrapClient (overrides: (real: SandboxEngine) => Partial<SandboxEngine>): SandboxEngine {
  const real = createDockerEngine(DOCKER_HOST)
  return { ...real, ...overrides(real) }
}
