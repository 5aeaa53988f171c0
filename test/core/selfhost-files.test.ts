import t from 'tap'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { parse } from 'yaml'
import { ConfigSchema, loadConfig } from '../../core/config.js'
import { TEST_API_KEY } from '../helper.js'

const root = fileURLToPath(new URL('../..', import.meta.url))
const read = (path: string): string => readFileSync(`${root}/${path}`, 'utf8')

/** KEY=value lines of an env file (comments and blanks skipped). */
function envFile (text: string): Map<string, string> {
  const out = new Map<string, string>()
  for (const line of text.split('\n')) {
    const m = /^([A-Z][A-Z0-9_]*)=(.*)$/.exec(line)
    if (m?.[1] !== undefined) out.set(m[1], m[2] ?? '')
  }
  return out
}

/** Variables compose.yaml itself reads (interpolation), not the server. */
const COMPOSE_ONLY = new Set(['DOCKER_GID', 'HOST_PORT', 'NODE_IMAGE', 'SERVER_IMAGE'])

// .env.example documents every variable that matters, and the server accepts it as is
t.test('.env.example: every server variable exists in the config schema, is commented, and boots once a key is set', async t => {
  const text = read('.env.example')
  const env = envFile(text)
  const known = new Set(Object.keys(ConfigSchema.properties))
  for (const name of ['MCP_API_KEY', 'PUBLIC_BASE_URL', 'LINK_SIGNING_KEY', 'DATA_DIR', 'MAX_RUNNING_SANDBOXES', 'CONTAINER_MEM_LIMIT', 'COMMAND_TIMEOUT', 'UPLOAD_MAX_BYTES']) {
    t.ok(env.has(name), `${name} is in .env.example`)
  }
  for (const name of env.keys()) {
    if (!COMPOSE_ONLY.has(name)) t.ok(known.has(name), `${name} is a real setting`)
    const before = text.slice(0, text.indexOf(`\n${name}=`))
    t.match(before.slice(before.lastIndexOf('\n\n')), /\n# /, `${name} has a comment above it`)
  }
  const values = Object.fromEntries([...env].filter(([k]) => !COMPOSE_ONLY.has(k)))
  t.throws(() => loadConfig({ ...values, MCP_API_KEY: 'short' }), /MCP_API_KEY/, 'a weak key is still refused')
  const config = loadConfig({ ...values, MCP_API_KEY: TEST_API_KEY })
  t.equal(config.CONTAINER_MEM_LIMIT, 2 * 1024 ** 3)
  t.equal(config.host, '0.0.0.0', 'with a key the server listens on all interfaces (reachable through -p)')
})

t.test('compose.yaml: socket, its group, the data dir at the same path inside and outside, env file, stop grace over CLOSE_GRACE_MS', async t => {
  const compose = parse(read('compose.yaml')) as { services: Record<string, { build: { context: string, args: Record<string, string> }, env_file: string, environment: Record<string, string>, volumes: string[], group_add: string[], stop_grace_period: string, ports: string[] }> }
  const svc = compose.services.cubicle
  t.ok(svc, 'one service, cubicle')
  if (svc === undefined) return
  t.equal(svc.build.context, '.')
  t.match(svc.build.args, { NODE_IMAGE: /node:20-bookworm-slim/, DOCKER_GID: /DOCKER_GID/ })
  t.ok(svc.volumes.includes('/var/run/docker.sock:/var/run/docker.sock'))
  const data = svc.volumes.find(v => v.includes('DATA_DIR'))
  const [outside, inside] = data?.split(/:(?=\$)/) ?? []
  t.equal(outside, inside, 'data dir: same path inside and outside')
  t.equal(svc.environment.DATA_DIR, outside, 'and the server is told that path')
  t.same(svc.group_add, ['${DOCKER_GID:-999}'])
  t.equal(svc.env_file, '${ENV_FILE:-.env}')
  t.match(svc.ports, ['${HOST_PORT:-8081}:8081'])
  const grace = Number(/^(\d+)s$/.exec(svc.stop_grace_period)?.[1]) * 1000
  t.ok(grace > loadConfig({}).CLOSE_GRACE_MS, 'docker waits longer than the server\'s own shutdown bound')
})

// npm start, the image's CMD and the bench run the server alike.
t.test('npm start and the Dockerfile\'s CMD give the server the same node flags (--optimize-for-size)', async t => {
  const start = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts.start ?? ''
  const m = /^node ((?:--[a-z-]+(?:=\S+)? )*)dist\/core\/server\.js$/.exec(start)
  t.ok(m !== null, `npm start runs the built server: ${start}`)
  const flags = (m?.[1] ?? '').split(' ').filter(Boolean)
  t.ok(flags.includes('--optimize-for-size'), 'memory over speed (docs/performance.md)')
  const cmd = /^CMD (\[.*\])$/m.exec(read('Dockerfile'))?.[1]
  t.same(JSON.parse(cmd ?? '[]'), ['node', ...flags, 'dist/core/server.js'], 'the image runs it the same way')
  t.notMatch(read('compose.yaml'), /^\s*(command|entrypoint):/m, 'compose.yaml keeps the image\'s CMD')
  const { deployedNodeArgs } = await import('../../bench/common.js')
  t.same(deployedNodeArgs(), flags, 'the bench measures the server as npm start runs it')
})
