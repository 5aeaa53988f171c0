/*
 * the server's own image, built here with no image registry (scripts/build-server-image.sh:
 * debootstrap base + Node.js from the npm registry) and run against the host's dockerd exactly as the
 * README says; then a whole session through it with the official MCP SDK client and Chromium.
 * Heavy: the image build is cached by Docker's layer cache; SERVER_IMAGE=<tag> reuses a built image.
 */
import t, { type Test } from 'tap'
import { execFile, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { chown, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { parse as parseYaml } from 'yaml'
import { TEST_API_KEY } from '../helper.js'
import { connect, textOf } from '../fixtures/mcp-probe.js'
import { dockerOrSkip, removeByPrefix, TEST_IMAGE } from './docker.js'
import { chromiumOrSkip, gotoReady, launchChromium } from './chromium.js'

declare const document: any

const run = promisify(execFile)
const root = fileURLToPath(new URL('../..', import.meta.url))
const SOCKET = '/var/run/docker.sock'

async function freePort (): Promise<number> {
  return await new Promise((resolve, reject) => {
    const srv = createServer().listen(0, '127.0.0.1', () => {
      const address = srv.address()
      srv.close(() => { typeof address === 'object' && address !== null ? resolve(address.port) : reject(new Error('no port')) })
    })
  })
}

/** Builds the image with the script the README names; output goes to the test log on failure only. */
async function buildImage (tag: string): Promise<{ ok: boolean, log: string }> {
  return await new Promise(resolve => {
    const child = spawn('bash', ['scripts/build-server-image.sh', '--tag', tag], { cwd: root })
    let log = ''
    child.stdout.on('data', c => { log += String(c) })
    child.stderr.on('data', c => { log += String(c) })
    child.on('close', code => resolve({ ok: code === 0, log }))
  })
}

const gate = await dockerOrSkip()

t.test('the server image builds without a registry, runs as the README says and serves a whole session', gate, async t => {
  const tag = process.env.SERVER_IMAGE ?? 'cubicle-server:test'
  if (process.env.SERVER_IMAGE === undefined) {
    const built = await buildImage(tag)
    if (!built.ok) t.comment(built.log.slice(-4000))
    t.ok(built.ok, 'scripts/build-server-image.sh succeeded')
    if (!built.ok) return
    t.match(built.log, /image size: \d+ MB/)
  }
  const inspect = JSON.parse((await run('docker', ['image', 'inspect', tag])).stdout)[0] as { Config: { User: string, Healthcheck?: { Test: string[] } }, Size: number }
  t.equal(inspect.Config.User, 'node', 'runs as the unprivileged user node')
  t.match(inspect.Config.Healthcheck?.Test.join(' '), /\/health/, 'has a healthcheck')
  t.ok(inspect.Size < 400e6, `image size ${Math.round(inspect.Size / 1e6)} MB`)
  const nodeVersion = (await run('docker', ['run', '--rm', '--entrypoint', 'node', tag, '--version'])).stdout.trim()
  t.match(nodeVersion, /^v24\./, `Node.js 24 LTS in the image (${nodeVersion})`)

  // Exactly the README's `docker run`: socket, its group, a data dir with the same path inside and outside.
  const prefix = `t-${randomBytes(4).toString('hex')}`
  const dataDir = await mkdtemp(join(tmpdir(), 'server-image-data-'))
  await chown(dataDir, 1000, 1000)
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const name = `${prefix}-server`
  t.teardown(async () => {
    await run('docker', ['rm', '-f', name]).catch(() => {})
    await removeByPrefix(prefix)
    await rm(dataDir, { recursive: true, force: true })
  })
  const gid = (await run('stat', ['-c', '%g', SOCKET])).stdout.trim()
  await run('docker', ['run', '-d', '--name', name, '-p', `127.0.0.1:${port}:8081`,
    '-v', `${SOCKET}:${SOCKET}`, '--group-add', gid, '-v', `${dataDir}:${dataDir}`,
    '-e', `DATA_DIR=${dataDir}`, '-e', `MCP_API_KEY=${TEST_API_KEY}`, '-e', `PUBLIC_BASE_URL=${base}`,
    '-e', `DOCKER_IMAGE=${TEST_IMAGE}`, '-e', `SANDBOX_PREFIX=${prefix}`, tag])

  let ready: Response | undefined
  for (let i = 0; i < 120 && ready?.status !== 200; i++) {
    await new Promise(resolve => setTimeout(resolve, 500))
    ready = await fetch(`${base}/ready`).catch(() => undefined)
  }
  if (ready?.status !== 200) t.comment((await run('docker', ['logs', name]).catch(e => e as { stdout: string, stderr: string })).stderr)
  t.equal(ready?.status, 200, '/ready: Docker, sandbox image and data dir from inside the container')

  const chat = 'image-session'
  const auth = { Authorization: `Bearer ${TEST_API_KEY}` }
  const client = await connect(t, base, { ...auth, 'X-Chat-Id': chat })
  t.equal(client.getServerVersion()?.name !== undefined, true, 'MCP initialize')
  const result = await client.callTool({ name: 'bash_tool', arguments: { command: 'id -un; printf "made in a sandbox\\n" > /mnt/user-data/outputs/report.txt', description: 'write a file' } }) as CallToolResult
  const text = textOf(result)
  t.match(text, /^assistant\n/, 'bash_tool ran in a sandbox')
  const link = /report\.txt: ([^\s\],]+)/.exec(text)?.[1]
  t.ok(link?.startsWith(`${base}/files/${chat}/`), 'the output is published with a public link')

  const download = await fetch(link ?? '')
  t.equal(download.status, 200)
  t.equal(await download.text(), 'made in a sandbox\n', 'downloaded through the public link')

  const prompt = await fetch(`${base}/system-prompt`, { headers: { ...auth, 'X-Chat-Id': chat } })
  const preview = prompt.headers.get('x-preview-url')
  t.ok(preview?.startsWith(`${base}/preview/${chat}`), 'the preview link')
  t.test('the preview page in Chromium lists the file', chromiumOrSkip(), async t => {
    const browser = await launchChromium(t)
    const page = await browser.newPage()
    await gotoReady(page, preview ?? '', async () =>
      await page.waitForFunction(() => [...document.querySelectorAll('#file-list li')].some((li: { textContent: string | null }) => li.textContent?.includes('report.txt') === true), undefined, { timeout: 30000 }))
    t.pass('report.txt is listed')
  })

  const health = await run('docker', ['inspect', '-f', '{{.State.Health.Status}}', name])
  t.match(health.stdout.trim(), /^(healthy|starting)$/)

  t.test('the image runs under the pod security of deploy/kubernetes/server.yaml', async t => { await podSecuritySession(t, tag) })

  const compose = await run('docker-compose', ['version', '--short']).then(() => true, () => false)
  if (!compose && process.env.REQUIRE_DOCKER === '1') t.fail('REQUIRE_DOCKER=1 but docker-compose is missing (apt-get install docker-compose)')
  const skip = compose ? false : 'SKIPPED: docker-compose is missing (apt-get install docker-compose)'
  t.test('the same image through compose.yaml and an .env file (docker-compose)', { skip }, async t => { await composeSession(t, tag) })
})

/** Runs compose.yaml with an env file made from .env.example, then one MCP call and a download. */
async function composeSession (t: Test, tag: string): Promise<void> {
  const prefix = `t-${randomBytes(4).toString('hex')}`
  const work = await mkdtemp(join(tmpdir(), 'server-compose-'))
  const dataDir = join(work, 'data')
  await mkdir(dataDir)
  await chown(dataDir, 1000, 1000)
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const example = await readFile(join(root, '.env.example'), 'utf8')
  const envFile = join(work, '.env')
  await writeFile(envFile, example
    .replace(/^MCP_API_KEY=.*$/m, `MCP_API_KEY=${TEST_API_KEY}`)
    .replace(/^PUBLIC_BASE_URL=.*$/m, `PUBLIC_BASE_URL=${base}`)
    .replace(/^DOCKER_IMAGE=.*$/m, `DOCKER_IMAGE=${TEST_IMAGE}\nSANDBOX_PREFIX=${prefix}`))
  const gid = (await run('stat', ['-c', '%g', SOCKET])).stdout.trim()
  const env = { ...process.env, ENV_FILE: envFile, DATA_DIR: dataDir, DOCKER_GID: gid, HOST_PORT: `127.0.0.1:${port}`, SERVER_IMAGE: tag }
  const compose = async (...args: string[]): Promise<{ stdout: string }> =>
    await run('docker-compose', ['-f', join(root, 'compose.yaml'), '-p', prefix, ...args], { env, cwd: root })
  t.teardown(async () => {
    await compose('down', '--timeout', '15').catch(() => {})
    await removeByPrefix(prefix)
    await rm(work, { recursive: true, force: true })
  })
  await compose('up', '-d', '--no-build')

  let ready: Response | undefined
  for (let i = 0; i < 120 && ready?.status !== 200; i++) {
    await new Promise(resolve => setTimeout(resolve, 500))
    ready = await fetch(`${base}/ready`).catch(() => undefined)
  }
  if (ready?.status !== 200) t.comment((await compose('logs').catch(e => e as { stdout: string })).stdout)
  t.equal(ready?.status, 200, 'ready through compose')
  const client = await connect(t, base, { Authorization: `Bearer ${TEST_API_KEY}`, 'X-Chat-Id': 'compose-chat' })
  const text = textOf(await client.callTool({ name: 'bash_tool', arguments: { command: 'echo composed > /mnt/user-data/outputs/c.txt; cat /mnt/user-data/outputs/c.txt', description: 'write' } }))
  t.match(text, /^composed\n/)
  const link = /c\.txt: ([^\s\],]+)/.exec(text)?.[1]
  t.equal(await (await fetch(link ?? '')).text(), 'composed\n', 'downloaded through the public link')
  await client.close()
  const id = (await compose('ps', '-q', 'cubicle')).stdout.trim()
  await compose('stop')
  const state = JSON.parse((await run('docker', ['inspect', '-f', '{{json .State}}', id])).stdout) as { ExitCode: number, Running: boolean }
  t.match(state, { Running: false, ExitCode: 0 }, 'compose stop: SIGTERM, a clean shutdown inside stop_grace_period (137 would be a kill)')
  t.match((await run('docker', ['logs', id])).stdout, /"msg":"closed"/)
}

interface PodSpec {
  securityContext: { runAsUser: number, runAsGroup: number, fsGroup: number }
  containers: Array<{ securityContext: { readOnlyRootFilesystem: boolean, allowPrivilegeEscalation: boolean, capabilities: { drop: string[] } }, resources: { limits: { memory: string } }, volumeMounts: Array<{ name: string, mountPath: string }> }>
  volumes: Array<{ name: string, emptyDir?: object, persistentVolumeClaim?: object }>
}

/**
 * The image as the Deployment runs it, translated to `docker run`: its user, group and fsGroup, a
 * read-only root, every capability dropped, no privilege escalation, its memory limit, a volume for
 * each claim and a tmpfs for each emptyDir. The server must boot and write DATA_DIR there; the
 * engine is not the subject (nothing answers at its address).
 */
async function podSecuritySession (t: Test, tag: string): Promise<void> {
  const spec = (parseYaml(await readFile(join(root, 'deploy/kubernetes/server.yaml'), 'utf8')) as { spec: { template: { spec: PodSpec } } }).spec.template.spec
  const c = spec.containers[0]!
  const name = `t-${randomBytes(4).toString('hex')}-pod`
  const port = await freePort()
  t.teardown(async () => {
    await run('docker', ['rm', '-f', name]).catch(() => {})
    await run('docker', ['volume', 'rm', '-f', `${name}-data`]).catch(() => {})
  })
  const mounts = c.volumeMounts.flatMap(m => {
    const volume = spec.volumes.find(v => v.name === m.name)
    if (volume?.emptyDir !== undefined) return ['--tmpfs', `${m.mountPath}:uid=${spec.securityContext.runAsUser},gid=${spec.securityContext.fsGroup}`]
    if (volume?.persistentVolumeClaim !== undefined) return ['-v', `${name}-${m.name}:${m.mountPath}`]
    throw new Error(`volume ${m.name}: neither a claim nor an emptyDir`)
  })
  // A fresh claim is owned by fsGroup (the kubelet's chgrp): the same for the volume.
  await run('docker', ['run', '--rm', '--user', '0', '-v', `${name}-data:/v`, '--entrypoint', 'sh', tag, '-c', `chown 0:${spec.securityContext.fsGroup} /v && chmod 2775 /v`])
  await run('docker', ['run', '-d', '--name', name, '-p', `127.0.0.1:${port}:8081`,
    '--user', `${spec.securityContext.runAsUser}:${spec.securityContext.runAsGroup}`, '--group-add', String(spec.securityContext.fsGroup),
    ...(c.securityContext.readOnlyRootFilesystem ? ['--read-only'] : []),
    '--cap-drop', c.securityContext.capabilities.drop.join(','),
    ...(c.securityContext.allowPrivilegeEscalation ? [] : ['--security-opt', 'no-new-privileges']),
    '--memory', c.resources.limits.memory.replace(/i$/, '').toLowerCase(),
    ...mounts,
    '-e', 'DATA_DIR=/data', '-e', `MCP_API_KEY=${TEST_API_KEY}`, '-e', 'DOCKER_HOST=tcp://127.0.0.1:1', tag])
  let ready: { status?: string, data_dir?: string } | undefined
  for (let i = 0; i < 120 && ready === undefined; i++) {
    await new Promise(resolve => setTimeout(resolve, 500))
    ready = await fetch(`http://127.0.0.1:${port}/ready`).then(async r => await r.json() as { data_dir?: string }, () => undefined)
  }
  const logs = await run('docker', ['logs', name]).then(r => r.stdout + r.stderr, (e: { stdout: string, stderr: string }) => e.stdout + e.stderr)
  t.equal(ready?.data_dir, 'writable', 'the server booted and can write DATA_DIR')
  t.notMatch(logs, /EROFS|EACCES|read-only file system/i, 'nothing it does needs a writable root')
}
