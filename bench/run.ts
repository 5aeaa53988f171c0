/*
 * npm run bench — speed and memory, as ratios against baselines measured in the same run on the
 * same machine (timings here are noisy; ratios are what we track). Needs a Docker engine and the
 * sandbox image. Starts the real server as a child process on 127.0.0.1 and talks MCP to it with the
 * official SDK client; the baselines use dockerode directly against the same daemon and image.
 *
 *   (a) bash_tool `echo` round trip over HTTP  ÷ raw exec in the same container       goal ≤ 0.25 (issue #11 §2:
 *       through the in-sandbox agent); 10 parallel bash_tool calls of one chat ÷ 10 parallel raw execs (wall)
 *   (b) new chat's first bash_tool result, pool empty (SANDBOX_POOL_SIZE=0: the same create path)
 *                                              ÷ raw create + start + exec             goal ≤ 1.2
 *   (c) 50 chats × 10 calls concurrently: errors (0), containers (50), p50/p99, server RSS
 *   (d) MCP tools/list round trip              ÷ GET /health round trip                (protocol overhead)
 *   (e) outputs listing of a 20k-file chat: cached listing ÷ uncached walk, and 100 parallel cold
 *       listings ÷ one uncached walk (single flight: ≈ 1 plus transfer, would be ≈ 100 without), RSS
 *   (f) CDP Runtime.evaluate through the bridge ÷ a direct CDP connection inside the sandbox  goal ≤ 1.5;
 *       screencast frames per second delivered to a viewer for an animating page             goal ≥ 10
 *   (h) 100 chats × 10 calls concurrently (issue #11): errors by message (goal 0), containers (100), p50/p99
 *       (goal ≤ 2 s), wall, server RSS at 100 live chats (goal ≤ 150 MiB) with its heap/external split,
 *       and the log lines of any "internal error (ref …)" answer
 *   (g) terminal keystroke echo through the WebSocket ÷ a direct `docker exec -it` TTY relay of the
 *       same tmux session, p50 and p99                                                        goal ≤ 1.2
 *   (i) new chat's first bash_tool result, pool hit (server restarted with SANDBOX_POOL_SIZE=2, pool full)
 *                                              ÷ `docker start` of a created container goal ≤ 0.3
 * BENCH_ONLY=b runs (b) alone; (i) restarts the server, so it runs last.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import Docker from 'dockerode'
import WebSocket from 'ws'
import { PassThrough } from 'node:stream'
import type { Duplex } from 'node:stream'
import { connectBackend, relayArgv, relayPipe } from '../plugins/cdp-bridge/cdp-client.js'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { chatPaths } from '../core/chat-paths.js'

const root = fileURLToPath(new URL('..', import.meta.url))
const IMAGE = process.env.DOCKER_IMAGE ?? 'computer-use-sandbox:latest'
const PREFIX = `bench${process.pid % 10000}`
const PORT = 18000 + (process.pid % 1000)
const BASE = `http://127.0.0.1:${PORT}`
const docker = new Docker()
// BENCH_ONLY=e,f,g,h runs those sections alone (after (d)); 'a' runs (a)–(c); empty runs everything.
const ONLY = (process.env.BENCH_ONLY ?? '').split(',').map(x => x.trim()).filter(Boolean)
const want = (section: string): boolean => ONLY.length === 0 || ONLY.includes(section)

const median = (xs: number[]): number => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] ?? NaN }
const pct = (xs: number[], p: number): number => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(s.length * p))] ?? NaN }
const ms = (n: number): string => `${n.toFixed(1)} ms`
const now = (): number => performance.now()

function rssMiB (pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return Number(m?.[1] ?? 0) / 1024
}

/** The server's log (warn and up): scanned for the refs of internal errors; kept after the run. */
const serverLog = join(tmpdir(), `cubicle-bench-${PREFIX}.log`)
/** Where bench/memory-probe.ts writes the server's memory split. */
let memoryFile = ''

async function startServer (dataDir: string, poolSize = 0): Promise<ChildProcess> {
  memoryFile = join(dataDir, 'memory.json')
  const log = openSync(serverLog, 'w')
  const child = spawn(process.execPath, ['--import=tsx', '--import=./bench/memory-probe.ts', 'core/server.ts'], {
    cwd: root,
    stdio: ['ignore', log, log],
    env: { ...process.env, BENCH_MEMORY_FILE: memoryFile, PORT: String(PORT), HOST: '127.0.0.1', DATA_DIR: dataDir, SANDBOX_PREFIX: PREFIX, LOG_LEVEL: 'warn', MAX_RUNNING_SANDBOXES: '0', SANDBOX_POOL_SIZE: String(poolSize), DOCKER_IMAGE: IMAGE, PUBLIC_BASE_URL: BASE }
  })
  // Up to 60 s: a loaded machine boots the server slowly.
  for (let i = 0; i < 300; i++) {
    try { if ((await fetch(`${BASE}/health`)).ok) return child } catch {}
    await new Promise(resolve => setTimeout(resolve, 200))
  }
  child.kill()
  throw new Error('server did not start')
}

async function client (chatId: string): Promise<Client> {
  const c = new Client({ name: 'bench', version: '0' })
  await c.connect(new StreamableHTTPClientTransport(new URL('/mcp', BASE), { requestInit: { headers: { 'X-Chat-Id': chatId } } }))
  return c
}

async function bash (c: Client, command: string): Promise<string> {
  const r = await c.callTool({ name: 'bash_tool', arguments: { command, description: 'bench' } }) as { isError?: boolean, content: Array<{ text?: string }> }
  if (r.isError === true) throw new Error(r.content[0]?.text ?? 'tool error')
  return r.content[0]?.text ?? ''
}

async function rawExec (container: Docker.Container, cmd: string[]): Promise<void> {
  const exec = await container.exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true, User: 'assistant' })
  const stream = await exec.start({ hijack: true, stdin: false })
  await new Promise<void>((resolve, reject) => { stream.on('end', resolve); stream.on('error', reject); stream.resume() })
  await exec.inspect()
}

async function cleanup (): Promise<void> {
  const containers = await docker.listContainers({ all: true, filters: { label: [`cu.prefix=${PREFIX}`] } })
  const raw = await docker.listContainers({ all: true, filters: { label: [`bench-raw=${PREFIX}`] } })
  await Promise.all([...containers, ...raw].map(async c => await docker.getContainer(c.Id).remove({ force: true }).catch(() => {})))
  const { Volumes } = await docker.listVolumes({ filters: { label: [`cu.prefix=${PREFIX}`] } })
  await Promise.all((Volumes ?? []).map(async v => await docker.getVolume(v.Name).remove().catch(() => {})))
  await docker.getNetwork(`${PREFIX}-sandboxes`).remove().catch(() => {})
}

const LISTING_FILES = 20_000

/** Creates the (e) chat's outputs before the server starts: empty files in one flat directory. */
function listingFixture (dataDir: string): void {
  const dir = chatPaths(dataDir, 'bench-e').outputs
  mkdirSync(dir, { recursive: true })
  for (let i = 0; i < LISTING_FILES; i++) closeSync(openSync(join(dir, `f${i}.txt`), 'w'))
}

/** (e) the listing's single flight and short cache against a walk that is forced to run. */
async function benchListing (server: ChildProcess): Promise<string> {
  const list = async (): Promise<number> => {
    const t0 = now()
    const res = await fetch(`${BASE}/api/outputs/bench-e`)
    if (!res.ok) throw new Error(`listing answered ${res.status}`)
    await res.arrayBuffer()
    return now() - t0
  }
  const walks: number[] = []
  for (let i = 0; i < 5; i++) {
    const ms = await list()
    walks.push(ms)
    // Past the cache lifetime (2 s, or twice the walk), so the next listing walks again.
    await new Promise(resolve => setTimeout(resolve, Math.max(2100, 2 * ms + 100)))
  }
  const cached: number[] = []
  await list()
  for (let i = 0; i < 100; i++) cached.push(await list())
  await new Promise(resolve => setTimeout(resolve, Math.max(2100, 2 * median(walks) + 100)))
  const rssBefore = rssMiB(server.pid!)
  let peak = rssBefore
  const sampler = setInterval(() => { peak = Math.max(peak, rssMiB(server.pid!)) }, 20)
  const t0 = now()
  await Promise.all(Array.from({ length: 100 }, list))
  const parallel = now() - t0
  clearInterval(sampler)
  const walk = median(walks)
  return `(e) ${LISTING_FILES} files: cached listing ${ms(median(cached))} ÷ uncached walk ${ms(walk)} = ${(median(cached) / walk).toFixed(3)}; ` +
    `100 parallel cold listings ${ms(parallel)} ÷ one walk = ${(parallel / walk).toFixed(2)} (single flight; ≈ 100 without); server RSS +${(peak - rssBefore).toFixed(0)} MiB`
}

// An animating page (a box moving every frame) and a direct CDP client run inside the sandbox on the
// image's own Node and the WebSocket of its playwright-core.
const ANIM_PAGE = `<!doctype html><title>anim</title><body style="margin:0"><div id="b" style="position:absolute;width:80px;height:80px;background:#4f46e5"></div>
<script>let x = 0; (function f () { x = (x + 7) % 1100; document.getElementById('b').style.transform = 'translate(' + x + 'px,' + (x % 600) + 'px)'; requestAnimationFrame(f) })()</script>`
const DIRECT_CDP = `const WS = require('/opt/cubicle-browser/node_modules/playwright-core/lib/utilsBundle').ws
const ws = new WS('ws://127.0.0.1:9222/devtools/page/' + process.argv[2])
let id = 0
const once = () => new Promise(resolve => {
  const my = ++id; const t0 = performance.now()
  const h = d => { if (JSON.parse(d).id === my) { ws.off('message', h); resolve(performance.now() - t0) } }
  ws.on('message', h)
  ws.send(JSON.stringify({ id: my, method: 'Runtime.evaluate', params: { expression: '1+1' } }))
})
ws.on('open', async () => {
  if (process.argv[3] === 'fps') {
    let frames = 0; let counting = false
    ws.on('message', d => { const m = JSON.parse(d); if (m.method !== 'Page.screencastFrame') return; if (counting) frames++; ws.send(JSON.stringify({ id: ++id, method: 'Page.screencastFrameAck', params: { sessionId: m.params.sessionId } })) })
    ws.send(JSON.stringify({ id: ++id, method: 'Page.startScreencast', params: { format: 'jpeg', quality: 70, maxWidth: 1280, maxHeight: 800 } }))
    await new Promise(r => setTimeout(r, 1000)); counting = true; const t0 = performance.now()
    await new Promise(r => setTimeout(r, 5000))
    console.log('fps ' + (frames / ((performance.now() - t0) / 1000)))
    ws.close(); return
  }
  const times = []
  for (let i = 0; i < 220; i++) { const t = await once(); if (i >= 20) times.push(t) }
  times.sort((a, b) => a - b)
  console.log('median ' + times[times.length >> 1])
  ws.close()
})`

/** A CDP client to a relayed page: call(method) resolves with the result; frames counted by the caller. */
async function cdpSocket (url: string): Promise<{ ws: WebSocket, call: (method: string, params?: object) => Promise<unknown> }> {
  const ws = new WebSocket(url, { maxPayload: 64 << 20 })
  await new Promise<void>((resolve, reject) => { ws.once('open', () => { resolve() }); ws.once('error', reject) })
  let next = 0
  const waiting = new Map<number, (v: unknown) => void>()
  ws.on('message', data => { const m = JSON.parse(data.toString()) as { id?: number, result?: unknown }; if (m.id !== undefined) waiting.get(m.id)?.(m.result) })
  return { ws, call: async (method, params = {}) => await new Promise(resolve => { const id = ++next; waiting.set(id, resolve); ws.send(JSON.stringify({ id, method, params })) }) }
}

/**
 * The same relay the bridge uses (socat in a Docker exec), opened by this process with dockerode and
 * without the server: separates Docker's exec plumbing from the server's own cost.
 */
async function rawRelayMedian (chatId: string, targetId: string): Promise<number> {
  const info = (await docker.listContainers({ filters: { label: [`cu.prefix=${PREFIX}`, `cu.chat-id=${chatId}`] } }))[0]
  if (info === undefined) throw new Error('no container')
  const exec = await docker.getContainer(info.Id).exec({ Cmd: relayArgv(9222), AttachStdin: true, AttachStdout: true, AttachStderr: true, User: 'assistant' })
  const socket = await exec.start({ hijack: true, stdin: true }) as unknown as Duplex
  const out = new PassThrough()
  docker.modem.demuxStream(socket, out, new PassThrough())
  const pipe = relayPipe({
    socket,
    demux: onStdout => { out.on('data', (c: Buffer) => { onStdout(c) }) },
    resize: async () => {},
    exitCode: async () => null,
    close: () => { socket.destroy() }
  })
  const ws = connectBackend(pipe, { port: 9222, targetId, maxPayload: 64 << 20, handshakeTimeout: 10_000 })
  await new Promise<void>((resolve, reject) => { ws.once('open', () => { resolve() }); ws.once('error', reject) })
  const times: number[] = []
  for (let i = 0; i < 220; i++) {
    const t0 = now()
    await new Promise<void>(resolve => {
      ws.once('message', () => { resolve() })
      ws.send(JSON.stringify({ id: i + 1, method: 'Runtime.evaluate', params: { expression: '1+1' } }))
    })
    if (i >= 20) times.push(now() - t0)
  }
  ws.close()
  pipe.destroy()
  return median(times)
}

/** (f): the live browser. */
async function benchBrowser (): Promise<string[]> {
  const c = await client('bench-e')
  await bash(c, `mkdir -p ~/anim && cat > ~/anim/index.html <<'EOF'\n${ANIM_PAGE}\nEOF\ncat > ~/direct-cdp.js <<'EOF'\n${DIRECT_CDP}\nEOF\nbrowser open file:///home/assistant/anim/index.html`)
  const targets = await (await fetch(`${BASE}/browser/bench-e/json`)).json() as Array<{ id: string, type: string, url: string, webSocketDebuggerUrl: string }>
  const page = targets.find(x => x.type === 'page' && x.url.endsWith('/anim/index.html'))
  if (page === undefined) throw new Error('the animating page is not listed')
  const { ws, call } = await cdpSocket(page.webSocketDebuggerUrl)
  const bridged: number[] = []
  for (let i = 0; i < 220; i++) {
    const t0 = now(); await call('Runtime.evaluate', { expression: '1+1' }); if (i >= 20) bridged.push(now() - t0)
  }
  const direct = Number(/median ([\d.]+)/.exec(await bash(c, `node ~/direct-cdp.js ${page.id}`))?.[1] ?? NaN)
  const raw = await rawRelayMedian('bench-e', page.id)
  let frames = 0
  let counting = false
  ws.on('message', data => {
    const m = JSON.parse(data.toString()) as { method?: string, params?: { sessionId: number } }
    if (m.method !== 'Page.screencastFrame') return
    if (counting) frames++
    void call('Page.screencastFrameAck', { sessionId: m.params?.sessionId })
  })
  await call('Page.startScreencast', { format: 'jpeg', quality: 70, maxWidth: 1280, maxHeight: 800 })
  await new Promise(resolve => setTimeout(resolve, 1000))
  counting = true
  const t0 = now()
  await new Promise(resolve => setTimeout(resolve, 5000))
  const fps = frames / ((now() - t0) / 1000)
  ws.close()
  const directFps = Number(/fps ([\d.]+)/.exec(await bash(c, `node ~/direct-cdp.js ${page.id} fps`))?.[1] ?? NaN)
  await c.close()
  return [
    `(f) CDP Runtime.evaluate via the bridge ${ms(median(bridged))} ÷ direct in the sandbox ${ms(direct)} = ${(median(bridged) / direct).toFixed(2)} (goal ≤ 1.5); ` +
      `the bare exec relay without the server: ${ms(raw)} (bridge ÷ bare relay = ${(median(bridged) / raw).toFixed(2)})`,
    `(f) screencast to a viewer through the bridge: ${fps.toFixed(1)} frames/s for an animating page (goal ≥ 10); a direct client in the sandbox gets ${directFps.toFixed(1)}`
  ]
}

const KEYS = 300

/** Resolves with the time from `send()` until `byte` appears in what `subscribe` delivers. */
async function echoTime (subscribe: (listener: (data: Buffer) => void) => () => void, byte: number, send: () => void): Promise<number> {
  return await new Promise(resolve => {
    const t0 = now()
    const off = subscribe(data => { if (data.includes(byte)) { off(); resolve(now() - t0) } })
    send()
  })
}

/**
 * (g) Keystroke echo: one key typed into the chat's tmux session `main`, timed until tmux echoes it;
 * through the server's WebSocket (ttyd framing, token-less in open mode) and, as the baseline,
 * through a TTY exec of the same `tmux new-session -A -s main` opened with dockerode (what
 * `docker exec -it` does), key by key in alternation so that load drift hits both alike.
 */
async function benchTerminal (): Promise<string> {
  const c = await client('bench-g')
  await bash(c, 'true')
  await c.close()
  const info = (await docker.listContainers({ filters: { label: [`cu.prefix=${PREFIX}`, 'cu.chat-id=bench-g'] } }))[0]
  if (info === undefined) throw new Error('no container')
  const ws = new WebSocket(`${BASE.replace('http', 'ws')}/terminal/bench-g/ws`, ['tty'])
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject) })
  ws.send(JSON.stringify({ columns: 120, rows: 40 }))
  const viaSocket = (listener: (data: Buffer) => void): () => void => {
    const handler = (data: Buffer): void => { if (data[0] === 0x30) listener(data.subarray(1)) }
    ws.on('message', handler)
    return () => { ws.off('message', handler) }
  }
  const exec = await docker.getContainer(info.Id).exec({
    Cmd: ['tmux', '-u', 'new-session', '-A', '-s', 'main'],
    User: 'assistant',
    WorkingDir: '/home/assistant',
    Env: ['TERM=xterm-256color'],
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    Tty: true
  })
  const direct = await exec.start({ hijack: true, stdin: true, Tty: true }) as unknown as Duplex
  await exec.resize({ w: 120, h: 40 })
  direct.resume()
  const viaDirect = (listener: (data: Buffer) => void): () => void => {
    direct.on('data', listener)
    return () => { direct.off('data', listener) }
  }
  await new Promise(resolve => setTimeout(resolve, 1500)) // both clients attached and drawn
  const socketTimes: number[] = []
  const directTimes: number[] = []
  for (let i = 0; i < KEYS; i++) {
    // Ctrl-U now and then keeps the shell's line short (a long line redraws more on each key). The keys
    // q and z appear nowhere in tmux's status line (session, window, host, clock), so only echoes match.
    if (i % 40 === 0) { ws.send('0\x15'); await new Promise(resolve => setTimeout(resolve, 200)) }
    socketTimes.push(await echoTime(viaSocket, 0x71, () => { ws.send('0q') }))
    directTimes.push(await echoTime(viaDirect, 0x7a, () => { direct.write('z') }))
  }
  ws.send('0\x15')
  ws.close()
  direct.destroy()
  const [s50, s99, d50, d99] = [median(socketTimes), pct(socketTimes, 0.99), median(directTimes), pct(directTimes, 0.99)]
  return `(g) terminal keystroke echo via the WebSocket p50 ${ms(s50)} p99 ${ms(s99)} ÷ direct docker exec -it p50 ${ms(d50)} p99 ${ms(d99)} = ` +
    `p50 ${(s50 / d50).toFixed(2)}, p99 ${(s99 / d99).toFixed(2)} (goal ≤ 1.2; ${KEYS} keys each)`
}

/** Ready sandboxes in the warm pool, from /metrics (open mode). */
async function pooled (): Promise<number> {
  const text = await (await fetch(`${BASE}/metrics`)).text()
  return Number(/^cubicle_sandbox_pool (\d+)/m.exec(text)?.[1] ?? NaN)
}

/**
 * (i) A pool hit: with the pool full (and nothing being created), a new chat's first bash_tool result,
 * against `docker start` of a container created beforehand (create not timed), alternating.
 */
async function benchPoolHit (): Promise<string> {
  const hit: number[] = []
  const start: number[] = []
  for (let i = 0; i < 5; i++) {
    for (let w = 0; w < 600 && await pooled() < 2; w++) await new Promise(resolve => setTimeout(resolve, 200))
    await new Promise(resolve => setTimeout(resolve, 1000))
    const c = await client(`bench-i-${i}`)
    const t0 = now(); await bash(c, 'echo first'); hit.push(now() - t0)
    await c.close()
    const raw = await docker.createContainer({ Image: IMAGE, Cmd: ['sleep', 'infinity'], User: 'assistant', Labels: { 'bench-raw': PREFIX }, HostConfig: { Init: true, CapDrop: ['ALL'] } })
    const t1 = now(); await raw.start(); start.push(now() - t1)
    await raw.remove({ force: true })
  }
  return `(i) first bash_tool, pool hit ${ms(median(hit))} ÷ docker start of a created container ${ms(median(start))} = ${(median(hit) / median(start)).toFixed(2)} (goal ≤ 0.3)`
}

/** The server's own memory split (bench/memory-probe.ts, on SIGUSR2): RSS, heap by space, external, handles. */
async function memorySplit (server: ChildProcess): Promise<string> {
  rmSync(memoryFile, { force: true })
  server.kill('SIGUSR2')
  for (let i = 0; i < 600; i++) {
    try {
      const m = JSON.parse(readFileSync(memoryFile, 'utf8')) as { rss: number, heapUsed: number, heapTotal: number, external: number, arrayBuffers: number, spaces: Record<string, number>, snapshot: string | null, handles: number }
      const mib = (n: number): string => (n / 1048576).toFixed(0)
      const spaces = Object.entries(m.spaces).sort((a, b) => b[1] - a[1]).slice(0, 3).map(([name, v]) => `${name} ${mib(v)}`).join(', ')
      return `RSS ${mib(m.rss)}: JS heap used ${mib(m.heapUsed)} of ${mib(m.heapTotal)} MiB [${spaces}], external ${mib(m.external)} (array buffers ${mib(m.arrayBuffers)}), ` +
        `handles ${m.handles}${m.snapshot === null ? '' : `, heap snapshot ${m.snapshot}`}`
    } catch {}
    await new Promise(resolve => setTimeout(resolve, 100))
  }
  return 'no memory report'
}

/** Log lines (message and first stack frames) of the internal-error refs the load saw. */
function internalErrorTrace (refs: string[]): string[] {
  if (refs.length === 0) return []
  const lines = readFileSync(serverLog, 'utf8').split('\n')
  return refs.slice(0, 5).map(ref => {
    const line = lines.find(l => l.includes(`"reqId":"${ref}"`) && l.includes('tool failed unexpectedly'))
    if (line === undefined) return `    ref ${ref}: no log line in ${serverLog}`
    const err = (JSON.parse(line) as { err?: { message?: string, stack?: string } }).err
    return `    ref ${ref}: ${(err?.stack ?? err?.message ?? line).split('\n').slice(0, 6).join(' | ')}`
  })
}

/** (c)/(h): `chats` chats at once, each making `calls` bash_tool calls in a row; every failure is counted by message. */
async function benchLoad (server: ChildProcess, label: string, chats: number, calls: number): Promise<string> {
  const rssBefore = rssMiB(server.pid!)
  const failures = new Map<string, number>()
  const refs: string[] = []
  const fail = (message: string): void => {
    const ref = /internal error \(ref ([^)]+)\)/.exec(message)?.[1]
    if (ref !== undefined) refs.push(ref)
    const key = message.replace(/\(ref [^)]+\)/, '(ref …)').slice(0, 120)
    failures.set(key, (failures.get(key) ?? 0) + 1)
  }
  const latencies: number[] = []
  let peakRss = rssBefore
  const sampler = setInterval(() => { peakRss = Math.max(peakRss, rssMiB(server.pid!)) }, 200)
  const t0 = now()
  await Promise.all(Array.from({ length: chats }, async (_, chat) => {
    const c = await client(`bench-${label}-${chat}`)
    for (let call = 0; call < calls; call++) {
      const s = now()
      try {
        const out = await bash(c, `echo ${chat}-${call}`)
        if (out !== `${chat}-${call}\n`) fail(`wrong output: ${out.slice(0, 60)}`)
      } catch (err) { fail(err instanceof Error ? err.message : String(err)) }
      latencies.push(now() - s)
    }
    await c.close()
  }))
  clearInterval(sampler)
  const wall = now() - t0
  // Every chat's sandbox is still running here: the RSS of `chats` live chats after the load settled.
  await new Promise(resolve => setTimeout(resolve, 2000))
  const rssLive = rssMiB(server.pid!)
  const split = await memorySplit(server)
  const created = (await docker.listContainers({ all: true, filters: { label: [`cu.prefix=${PREFIX}`] } }))
    .filter(c => c.Labels['cu.chat-id']?.startsWith(`bench-${label}-`) === true).length
  // The next scenario starts without these sandboxes (the server finds them gone and does not mind).
  await Promise.all((await docker.listContainers({ all: true, filters: { label: [`cu.prefix=${PREFIX}`] } }))
    .filter(c => c.Labels['cu.chat-id']?.startsWith(`bench-${label}-`) === true)
    .map(async c => await docker.getContainer(c.Id).remove({ force: true }).catch(() => {})))
  const errors = [...failures.values()].reduce((a, b) => a + b, 0)
  const byMessage = [...failures].sort((a, b) => b[1] - a[1]).map(([m, n]) => `    ${n} × ${m}`)
  return [`(${label}) ${chats}×${calls} calls in ${(wall / 1000).toFixed(1)} s: errors ${errors} (goal 0), containers ${created} (goal ${chats}), ` +
    `p50 ${ms(pct(latencies, 0.5))}, p99 ${ms(pct(latencies, 0.99))} (goal ≤ 2 s), server RSS ${rssBefore.toFixed(0)} → peak ${peakRss.toFixed(0)} MiB, ` +
    `${rssLive.toFixed(0)} MiB at ${chats} live chats (${split})`, ...byMessage, ...internalErrorTrace(refs)].join('\n')
}

async function main (): Promise<void> {
  await docker.ping()
  const dataDir = mkdtempSync(join(tmpdir(), 'cubicle-bench-'))
  listingFixture(dataDir)
  let server = await startServer(dataDir)
  const results: string[] = []
  try {
    // (d) protocol overhead
    const c0 = await client('bench-d')
    const health: number[] = []
    const list: number[] = []
    for (let i = 0; i < 200; i++) {
      let t0 = now(); await fetch(`${BASE}/health`).then(async r => await r.text()); health.push(now() - t0)
      t0 = now(); await c0.listTools(); list.push(now() - t0)
    }
    results.push(`(d) tools/list ${ms(median(list))} ÷ /health ${ms(median(health))} = ${(median(list) / median(health)).toFixed(2)}`)

    if (want('h')) {
      results.push(await benchLoad(server, 'h', 100, 10))
      // Asked for by name: the 50-chat variant too (else (c) is it).
      if (ONLY.includes('h')) results.push(await benchLoad(server, 'h50', 50, 10))
    }
    if (want('e')) results.push(await benchListing(server))
    if (want('f')) results.push(...await benchBrowser())
    if (want('g')) results.push(await benchTerminal())
    if (want('a')) await benchWarmAndLoad(server, results)
    else if (ONLY.includes('b')) results.push(await benchCold())
    if (want('i')) {
      // (i) needs the warm pool: the same server restarted with SANDBOX_POOL_SIZE=2 (it re-adopts every sandbox).
      server.kill('SIGTERM')
      await new Promise(resolve => server.once('exit', resolve))
      server = await startServer(dataDir, 2)
      results.push(await benchPoolHit())
    }
  } finally {
    server.kill('SIGTERM')
    await cleanup()
    rmSync(dataDir, { recursive: true, force: true })
    console.log('\nCubicle bench (same machine, same run)')
    for (const line of results) console.log(line)
  }
}

/** (a), (b) and (c). */
async function benchWarmAndLoad (server: ChildProcess, results: string[]): Promise<void> {
  // (a) warm round trip vs raw exec in the same container
  const ca = await client('bench-a')
  await bash(ca, 'true')
  const container = docker.getContainer((await docker.listContainers({ filters: { label: [`cu.prefix=${PREFIX}`, 'cu.chat-id=bench-a'] } }))[0]!.Id)
  const viaMcp: number[] = []
  const viaRaw: number[] = []
  for (let i = 0; i < 40; i++) {
    let t0 = now(); await bash(ca, 'echo hi'); viaMcp.push(now() - t0)
    t0 = now(); await rawExec(container, ['echo', 'hi']); viaRaw.push(now() - t0)
  }
  results.push(`(a) bash_tool echo ${ms(median(viaMcp))} ÷ raw exec ${ms(median(viaRaw))} = ${(median(viaMcp) / median(viaRaw)).toFixed(2)} (goal ≤ 0.25, agent on; issue #11 §2)`)
  // 10 calls of one chat at once: they share the chat's agent stream; the baseline is 10 raw execs at once.
  const parMcp: number[] = []
  const parRaw: number[] = []
  for (let i = 0; i < 5; i++) {
    let t0 = now(); await Promise.all(Array.from({ length: 10 }, async () => await bash(ca, 'echo hi'))); parMcp.push(now() - t0)
    t0 = now(); await Promise.all(Array.from({ length: 10 }, async () => { await rawExec(container, ['echo', 'hi']) })); parRaw.push(now() - t0)
  }
  results.push(`(a) 10 parallel bash_tool echo (one chat) ${ms(median(parMcp))} ÷ 10 parallel raw exec ${ms(median(parRaw))} = ${(median(parMcp) / median(parRaw)).toFixed(2)} (wall)`)

  results.push(await benchCold())

  // (c) 50 chats × 10 calls concurrently
  results.push(await benchLoad(server, 'c', 50, 10))
}

/** (b) cold first call vs raw create + start + exec (the server runs with SANDBOX_POOL_SIZE=0 here). */
async function benchCold (): Promise<string> {
  const cold: number[] = []
  const rawCold: number[] = []
  for (let i = 0; i < 5; i++) {
    const c = await client(`bench-b-${i}`)
    let t0 = now(); await bash(c, 'echo first'); cold.push(now() - t0)
    await c.close()
    t0 = now()
    const raw = await docker.createContainer({ Image: IMAGE, Cmd: ['sleep', 'infinity'], User: 'assistant', Labels: { 'bench-raw': PREFIX }, HostConfig: { Init: true, CapDrop: ['ALL'] } })
    await raw.start()
    await rawExec(raw, ['echo', 'first'])
    rawCold.push(now() - t0)
    await raw.remove({ force: true })
  }
  return `(b) first bash_tool, pool empty ${ms(median(cold))} ÷ raw create+start+exec ${ms(median(rawCold))} = ${(median(cold) / median(rawCold)).toFixed(2)} (goal ≤ 1.2)`
}

await main()
