/*
 * What every bench script shares: the benched server (the real one, as a child process on 127.0.0.1,
 * with bench/server-probe.mjs preloaded and an IPC channel to ask it), the official MCP client,
 * raw dockerode baselines, statistics and a description of the machine.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs'
import { cpus, loadavg, release, tmpdir, totalmem } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import Docker from 'dockerode'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { ProbeRequest } from './probe-types.js'
import { sandboxNames } from '../plugins/sandbox/names.js'
import { removeFirewall } from '../plugins/sandbox-docker/docker-firewall.js'

export const root = fileURLToPath(new URL('..', import.meta.url))
export const IMAGE = process.env.DOCKER_IMAGE ?? 'computer-use-sandbox:latest'
export const PREFIX = `bench${process.pid % 10000}`
export const PORT = 18000 + (process.pid % 1000)
export const BASE = `http://127.0.0.1:${PORT}`
export const docker = new Docker()
/** The in-sandbox agent is on unless BENCH_AGENT=false (to compare against the docker exec path). */
export const AGENT = process.env.BENCH_AGENT !== 'false'

export const median = (xs: number[]): number => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] ?? NaN }
export const pct = (xs: number[], p: number): number => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(s.length * p))] ?? NaN }
export const ms = (n: number): string => `${n.toFixed(1)} ms`
export const now = (): number => performance.now()
/** The clock of server-probe.mjs traces (absolute ms). */
export const wall = (): number => performance.timeOrigin + performance.now()
export const sleep = async (n: number): Promise<void> => { await new Promise(resolve => setTimeout(resolve, n)) }

/** 0 when the process is gone. */
export function rssMiB (pid: number): number {
  let status = ''
  try { status = readFileSync(`/proc/${pid}/status`, 'utf8') } catch {}
  const m = /VmRSS:\s+(\d+) kB/.exec(status)
  return Number(m?.[1] ?? 0) / 1024
}

/** The server's log (warn and up): scanned for the refs of internal errors; kept after the run. */
export const serverLog = join(tmpdir(), `cubicle-bench-${PREFIX}.log`)

export interface Server { child: ChildProcess, ask: <T = Record<string, unknown>>(req: ProbeRequest) => Promise<T>, stop: () => Promise<void> }

/**
 * The server as deployed (`node dist/core/server.js`, built once per bench process from the current
 * sources), or from the sources through tsx with BENCH_SERVER=tsx (its loader adds about 40 MiB of RSS).
 */
export const SERVER_MODE = process.env.BENCH_SERVER === 'tsx' ? 'tsx' : 'dist'
let built = false

function buildServer (): void {
  if (built || SERVER_MODE === 'tsx' || process.env.BENCH_NO_BUILD === '1') return
  // `npm run build`'s script: the TypeScript build and the vendor bundle, as deployed (docs/architecture.md#the-build).
  execFileSync(process.execPath, [join(root, 'scripts/build.mjs')], { cwd: root, stdio: 'inherit' })
  built = true
}

/** The node flags of `npm start` (package.json; the Dockerfile's CMD has the same, test/core/docs.test.ts). */
export function deployedNodeArgs (): string[] {
  const start = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start
  const m = /^node ((?:--[a-z-]+(?:=\S+)? )*)dist\/core\/server\.js$/.exec(start)
  if (m === null) throw new Error(`unexpected start script: ${start}`)
  return (m[1] ?? '').split(' ').filter(Boolean)
}

/** The server's node flags: as deployed, or BENCH_NODE_ARGS (e.g. "" or --max-semi-space-size=4) to measure another setting. */
function serverNodeArgs (): string[] {
  const own = process.env.BENCH_NODE_ARGS
  return own === undefined ? deployedNodeArgs() : own.split(' ').filter(Boolean)
}

/**
 * Starts the server with its default settings except where a bench needs otherwise: its own port,
 * data dir and prefix, no running-sandbox cap (100 chats at once), the agent per BENCH_AGENT, and
 * SANDBOX_POOL_SIZE only when `poolSize` is given (the default, auto, otherwise).
 */
export async function startServer (dataDir: string, poolSize?: number, extraEnv: Record<string, string> = {}): Promise<Server> {
  buildServer()
  const log = openSync(serverLog, 'a')
  const entry = SERVER_MODE === 'tsx' ? ['--import=tsx', 'core/server.ts'] : ['dist/core/server.js']
  const flags = serverNodeArgs()
  const child = spawn(process.execPath, [...flags, '--import=./bench/server-probe.mjs', ...entry], {
    cwd: root,
    stdio: ['ignore', log, log, 'ipc'],
    env: {
      ...process.env,
      PORT: String(PORT),
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      SANDBOX_PREFIX: PREFIX,
      LOG_LEVEL: 'warn',
      MAX_RUNNING_SANDBOXES: '0',
      ...(poolSize !== undefined && { SANDBOX_POOL_SIZE: String(poolSize) }),
      SANDBOX_AGENT: String(AGENT),
      DOCKER_IMAGE: IMAGE,
      PUBLIC_BASE_URL: BASE,
      ...extraEnv
    }
  })
  let seq = 0
  const waiting = new Map<number, { resolve: (v: never) => void, reject: (e: Error) => void }>()
  child.on('message', (m: { seq: number, ok: boolean, result?: unknown, error?: string }) => {
    const w = waiting.get(m.seq)
    waiting.delete(m.seq)
    if (m.ok) w?.resolve(m.result as never); else w?.reject(new Error(m.error))
  })
  const ask = async <T>(req: ProbeRequest): Promise<T> => await new Promise<T>((resolve, reject) => {
    const s = ++seq
    waiting.set(s, { resolve: resolve as (v: never) => void, reject })
    child.send({ ...req, seq: s })
  })
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null) return
    const exited = new Promise(resolve => child.once('exit', resolve))
    child.kill('SIGTERM')
    await exited
  }
  // Up to 60 s: a loaded machine boots the server slowly.
  for (let i = 0; i < 300; i++) {
    try { if ((await fetch(`${BASE}/health`)).ok) return { child, ask, stop } } catch {}
    await sleep(200)
  }
  child.kill()
  throw new Error('server did not start')
}

export async function client (chatId: string): Promise<Client> {
  const c = new Client({ name: 'bench', version: '0' })
  await c.connect(new StreamableHTTPClientTransport(new URL('/mcp', BASE), { requestInit: { headers: { 'X-Chat-Id': chatId } } }))
  return c
}

export async function bash (c: Client, command: string): Promise<string> {
  const r = await c.callTool({ name: 'bash_tool', arguments: { command, description: 'bench' } }) as { isError?: boolean, content: Array<{ text?: string }> }
  if (r.isError === true) throw new Error(r.content[0]?.text ?? 'tool error')
  return r.content[0]?.text ?? ''
}

/** A raw dockerode exec (create, start, read to the end, inspect); `steps` gets each step's duration. */
export async function rawExec (container: Docker.Container, cmd: string[], steps?: Record<string, number>): Promise<void> {
  let t = now()
  const lap = (name: string): void => { if (steps !== undefined) steps[name] = now() - t; t = now() }
  const exec = await container.exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true, User: 'assistant' })
  lap('exec create')
  const stream = await exec.start({ hijack: true, stdin: false })
  lap('exec start')
  await new Promise<void>((resolve, reject) => { stream.on('end', resolve); stream.on('error', reject); stream.resume() })
  lap('exec output to end')
  await exec.inspect()
  lap('exec inspect')
}

/** A chat's container (dockerode), by its deterministic name: Docker labels carry no chat. */
export async function chatContainer (chatId: string): Promise<Docker.ContainerInfo | undefined> {
  const name = sandboxNames(PREFIX, chatId).container
  return (await docker.listContainers({ all: true, filters: { label: [`cu.prefix=${PREFIX}`], name: [`^/${name}$`] } }))[0]
}

/** The raw baseline container: what the server creates, minus mounts and labels of its own. */
export async function rawContainer (): Promise<Docker.Container> {
  return await docker.createContainer({ Image: IMAGE, Cmd: ['sleep', 'infinity'], User: 'assistant', Labels: { 'bench-raw': PREFIX }, HostConfig: { Init: true, CapDrop: ['ALL'] } })
}

/** Removes every container, volume and network of this run's prefix (and nothing else). */
export async function cleanup (): Promise<void> {
  const containers = await docker.listContainers({ all: true, filters: { label: [`cu.prefix=${PREFIX}`] } })
  const raw = await docker.listContainers({ all: true, filters: { label: [`bench-raw=${PREFIX}`] } })
  await Promise.all([...containers, ...raw].map(async c => await docker.getContainer(c.Id).remove({ force: true }).catch(() => {})))
  const { Volumes } = await docker.listVolumes({ filters: { label: [`cu.prefix=${PREFIX}`] } })
  await Promise.all((Volumes ?? []).map(async v => await docker.getVolume(v.Name).remove().catch(() => {})))
  // The egress firewall's chain stays when a server stops (docker-firewall.ts): the bench's own goes with its network.
  const net = await docker.getNetwork(`${PREFIX}-sandboxes`).inspect().catch(() => null) as { Id?: string } | null
  if (typeof net?.Id === 'string') await removeFirewall(`br-${net.Id.slice(0, 12)}`)
  await docker.getNetwork(`${PREFIX}-sandboxes`).remove().catch(() => {})
}

/**
 * A profile script's frame: a server (startServer's pool size) on a fresh temp DATA_DIR; `body` adds to the
 * report's lines, which start with the machine. Whatever happens, the server is stopped, this run's Docker
 * objects and the DATA_DIR are removed and the report is printed.
 */
export async function profileSession (poolSize: number | undefined, body: (server: Server, lines: string[], dataDir: string) => Promise<void>): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'cubicle-bench-'))
  const lines: string[] = [`machine: ${await machine()}`]
  let server: Server | undefined
  try {
    server = await startServer(dataDir, poolSize)
    await body(server, lines, dataDir)
  } finally {
    await server?.stop()
    await cleanup()
    rmSync(dataDir, { recursive: true, force: true })
    console.log(lines.join('\n'))
  }
}

/** The machine the numbers came from. */
export async function machine (): Promise<string> {
  const v = await docker.version()
  const info = await docker.info() as { CgroupVersion?: string, Driver?: string }
  const os = /PRETTY_NAME="([^"]+)"/.exec(readFileSync('/etc/os-release', 'utf8'))?.[1] ?? 'Linux'
  return `${cpus().length} cores (${cpus()[0]?.model.trim() ?? '?'}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB, ${os}, kernel ${release()}, ` +
    `Docker ${v.Version} (cgroup v${info.CgroupVersion ?? '?'}, ${info.Driver ?? '?'}), Node ${process.version}, load average ${loadavg().map(x => x.toFixed(1)).join(' ')}, ` +
    `agent ${AGENT ? 'on' : 'off'}, server ${['node', ...serverNodeArgs(), SERVER_MODE === 'dist' ? 'dist/core/server.js' : '--import=tsx core/server.ts'].join(' ')}` +
    (process.env.BENCH_NODE_ARGS === undefined && SERVER_MODE === 'dist' ? ' (as deployed)' : ` (npm start: node ${[...deployedNodeArgs(), 'dist/core/server.js'].join(' ')})`)
}
