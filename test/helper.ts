import type { Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildApp, type Entry } from '../core/app.js'
import { loadConfig, type AppConfig } from '../core/config.js'
import manifest from '../fastify.config.js'
import { NO_DOCKER_HOST, UNIT_TIER } from './fixtures/tier.js'
import { closeAppStep, runSteps } from './fixtures/bounded.js'
import { createServer } from 'node:net'

export const TEST_IMAGE = process.env.DOCKER_IMAGE ?? 'computer-use-sandbox:latest'

/** An MCP_API_KEY the boot accepts (at least 32 characters). */
export const TEST_API_KEY = 'test-api-key-0123456789abcdef-0123456789'
/** A second valid key, for rotation and "another server" cases. */
export const OTHER_API_KEY = 'other-api-key-fedcba9876543210-987654321'

/**
 * Config for tests: silent logs and no warm pool unless the test says otherwise (a pool would start
 * sandboxes of its own beside the ones a test counts or measures; sandbox-pool tests ask for one). In
 * the unit tier the Docker endpoint defaults to one where nothing answers, so a test that reaches the
 * engine fails.
 */
export function testConfig (env: Record<string, string> = {}): AppConfig {
  return loadConfig({ DOCKER_IMAGE: TEST_IMAGE, LOG_LEVEL: 'silent', PUBLIC_BASE_URL: 'http://cubicle.test', SANDBOX_POOL_SIZE: '0', ...(UNIT_TIER && { DOCKER_HOST: NO_DOCKER_HOST }), ...env })
}

/** A ready app that closes itself when the test ends. `plugins` replaces the default manifest. */
export async function build (t: Test, env: Record<string, string> = {}, plugins?: (config: AppConfig) => Entry[]): Promise<FastifyInstance> {
  const config = testConfig(env)
  const app = await buildApp(config, (plugins ?? manifest)(config), { logger: false })
  // Bounded (test/fixtures/bounded.ts): a close that hangs is cut after 30 s and said on stderr.
  t.teardown(async () => { await runSteps([closeAppStep(app)]) })
  await app.ready()
  return app
}

/** build() then listen on an ephemeral loopback port; returns the app and its base URL. */
export async function listen (t: Test, env: Record<string, string> = {}, plugins?: (config: AppConfig) => Entry[]): Promise<{ app: FastifyInstance, url: string }> {
  const app = await build(t, env, plugins)
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  return { app, url }
}

/**
 * The failure throttles count in wall-clock minutes (core/failure-throttle.ts): a test that counts
 * failures and straddles a minute's end starts counting anew halfway (seen: the last bad key got 401,
 * not 429). Such a test calls this first: it starts at least `needMs` before the next minute.
 */
export async function awayFromMinuteEdge (needMs = 15_000): Promise<void> {
  const into = Date.now() % 60_000
  if (into > 60_000 - needMs) await new Promise(resolve => setTimeout(resolve, 60_000 - into + 100))
}

/** A loopback TCP port that was free a moment ago (for a child process that must listen on a given port). */
export async function freePort (): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => { resolve(port) })
    })
  })
}
