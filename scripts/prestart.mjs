// Runs before `npm start`: builds what the server needs when it is missing or stale, so the start
// command works on a fresh clone — the TypeScript build (dist/) and, when a Docker engine answers,
// the sandbox image (DOCKER_IMAGE, default computer-use-sandbox:latest).
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const say = msg => process.stderr.write(`[prestart] ${msg}\n`)

function newest (dir) {
  let latest = 0
  for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) { if (entry.name !== 'node_modules' && entry.name !== 'public') latest = Math.max(latest, newest(path)) } else if (entry.name.endsWith('.ts')) latest = Math.max(latest, statSync(join(root, path)).mtimeMs)
  }
  return latest
}

const built = join(root, 'dist/core/server.js')
const sources = Math.max(newest('core'), newest('plugins'), statSync(join(root, 'fastify.config.ts')).mtimeMs)
if (!existsSync(built) || statSync(built).mtimeMs < sources) {
  say('compiling TypeScript (npm run build)')
  const r = spawnSync('npm', ['run', 'build'], { cwd: root, stdio: 'inherit' })
  if (r.status !== 0) process.exit(r.status ?? 1)
}

const image = process.env.DOCKER_IMAGE || 'computer-use-sandbox:latest'
let docker = false
try { execFileSync('docker', ['info'], { stdio: 'ignore', timeout: 10000 }); docker = true } catch {}
if (!docker) {
  say('no Docker engine answers: the server starts, /ready reports docker unavailable and tools fail until one runs (see docs/operations.md)')
} else {
  let present = false
  try { execFileSync('docker', ['image', 'inspect', image], { stdio: 'ignore' }); present = true } catch {}
  if (!present) {
    say(`sandbox image ${image} is missing: building it now (a few minutes, once)`)
    const r = spawnSync('bash', [join(root, 'sandbox-image/build.sh'), '--tag', image], { cwd: root, stdio: 'inherit' })
    if (r.status !== 0) { say('building the sandbox image failed; see the output above'); process.exit(r.status ?? 1) }
  }
}
