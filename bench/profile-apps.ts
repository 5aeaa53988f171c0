/*
 * Where a small request through an app preview URL spends its time (goal (k) of bench/run.ts), measured:
 * one chat runs the web app of test/fixtures/web-app.ts; alternating rounds of sequential keep-alive GETs of
 * `/small` through `/apps/<chat>/3000/` with Node's http client, the same with fetch (for information),
 * `GET /health` of the same server (its HTTP floor without the proxy), and the request from inside the
 * sandbox over loopback by a client warmed up by 100 requests (the goal's divisor); then the server's CPU time per proxied request (its
 * /proc stat over a window) and a V8 CPU profile of the server over that window (bench/cpu.ts).
 *
 *   npx tsx bench/profile-apps.ts          BENCH_N=300 (requests per kind), BENCH_PROFILE=0 skips the profile,
 *                                          BENCH_PROFILE_FILE=<path> keeps it,
 *                                          BENCH_PERF=<file> records the server with perf over 1000 requests,
 *                                          BENCH_STRACE=1 adds the server's system calls over 500 requests (strace -c)
 */
import { readdirSync, readFileSync } from 'node:fs'
import { Agent, get } from 'node:http'
import { join } from 'node:path'
import { startApp } from '../test/fixtures/web-app.js'
import { insideScript } from './apps.js'
import { BASE, bash, chatContainer, client, docker, median, ms, now, pct, profileSession } from './common.js'
import { summarizeProfile } from './cpu.js'

const N = Number(process.env.BENCH_N ?? 300)
const ROUNDS = 10
const PROFILE = process.env.BENCH_PROFILE !== '0'

const keepAlive = new Agent({ keepAlive: true, maxSockets: 1 })

/** One GET with Node's http client on a kept-alive connection, in ms. */
async function nodeGet (url: string): Promise<number> {
  return await new Promise((resolve, reject) => {
    const t0 = now()
    get(url, { agent: keepAlive }, res => {
      res.resume()
      res.once('end', () => { if (res.statusCode === 200) resolve(now() - t0); else reject(new Error(`${url}: HTTP ${res.statusCode ?? 0}`)) })
    }).once('error', reject)
  })
}

async function fetchGet (url: string): Promise<number> {
  const t0 = now()
  const res = await fetch(url)
  await res.arrayBuffer()
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`)
  return now() - t0
}

/** user and system CPU time of a process, ms. */
function cpuMs (pid: number): { user: number, sys: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number)
  return { user: (f[11] ?? 0) * 10, sys: (f[12] ?? 0) * 10 }
}

/** CPU ms of each of a process's threads, by name (threads of one name summed). */
function threadsMs (pid: number): Map<string, number> {
  const out = new Map<string, number>()
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8')
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')).replace(/[0-9]+$/, '')
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number)
      out.set(name, (out.get(name) ?? 0) + ((f[11] ?? 0) + (f[12] ?? 0)) * 10)
    } catch {}
  }
  return out
}

/** Host pids of the chat's agent and app (the processes a proxied request wakes besides the server). */
async function sandboxPids (chatId: string): Promise<Array<{ name: string, pid: number }>> {
  const info = await chatContainer(chatId)
  if (info === undefined) return []
  const top = await docker.getContainer(info.Id).top({ ps_args: '-eo pid,args' }) as { Titles: string[], Processes: string[][] }
  const out: Array<{ name: string, pid: number }> = []
  for (const [pid, args] of top.Processes) {
    if (args?.includes('cubicle-agent.py') === true) out.push({ name: 'agent', pid: Number(pid) })
    else if (args?.startsWith('node') === true && args.includes('3000')) out.push({ name: 'app', pid: Number(pid) })
  }
  return out
}

await profileSession(undefined, async (server, lines, dataDir) => {
  const c = await client('bench-k')
  await bash(c, startApp(3000))
  const proxyUrl = `${BASE}/apps/bench-k/3000/small`
  for (let i = 0; i < 50; i++) { await nodeGet(proxyUrl); await fetchGet(proxyUrl) }
  const kinds: Record<string, number[]> = { 'proxied, node http': [], 'proxied, fetch': [], 'GET /health, node http': [], 'inside, node http': [] }
  const per = Math.ceil(N / ROUNDS)
  for (let r = 0; r < ROUNDS; r++) {
    for (let i = 0; i < per; i++) kinds['proxied, node http']?.push(await nodeGet(proxyUrl))
    for (let i = 0; i < per; i++) kinds['proxied, fetch']?.push(await fetchGet(proxyUrl))
    for (let i = 0; i < per; i++) kinds['GET /health, node http']?.push(await nodeGet(`${BASE}/health`))
    kinds['inside, node http']?.push(...JSON.parse((await bash(c, insideScript(per, 100))).trim().split('\n')[0] ?? '[]') as number[])
  }
  const inside = median(kinds['inside, node http'] ?? [])
  for (const [kind, xs] of Object.entries(kinds)) {
    lines.push(`  ${kind}: median ${ms(median(xs))}, p90 ${ms(pct(xs, 0.9))} (${xs.length}); ÷ inside ${(median(xs) / inside).toFixed(2)}`)
  }
  // The server's CPU per proxied request (sequential node http GETs), then its profile over as many more.
  const pid = server.child.pid ?? 0
  const M = 1000
  const window = async (url = proxyUrl): Promise<string> => {
    const cpu0 = cpuMs(pid)
    const t0 = now()
    for (let i = 0; i < M; i++) await nodeGet(url)
    const cpu1 = cpuMs(pid)
    const user = (cpu1.user - cpu0.user) / M
    const sys = (cpu1.sys - cpu0.sys) / M
    return `${ms((now() - t0) / M)} each, server CPU ${(user + sys).toFixed(3)} ms per request (user ${user.toFixed(3)}, system ${sys.toFixed(3)})`
  }
  const threads0 = threadsMs(pid)
  const inSandbox = await sandboxPids('bench-k')
  const sandbox0 = inSandbox.map(p => cpuMs(p.pid))
  lines.push(`  ${M} proxied GETs: ${await window()}`)
  const threads1 = threadsMs(pid)
  lines.push(`    in the sandbox (CPU ms per request): ${inSandbox.map((p, i) => { const a = sandbox0[i]; const b = cpuMs(p.pid); return `${p.name} ${((b.user + b.sys - (a?.user ?? 0) - (a?.sys ?? 0)) / M).toFixed(3)}` }).join(', ')}`)
  lines.push(`    by thread (ms per request): ${[...threads1].map(([name, v]) => [name, (v - (threads0.get(name) ?? 0)) / M] as const).filter(([, v]) => v > 0).sort((a, b) => b[1] - a[1]).map(([name, v]) => `${name} ${v.toFixed(3)}`).join(', ')}`)
  lines.push(`  ${M} GET /health: ${await window(`${BASE}/health`)}`)
  if (process.env.BENCH_STRACE === '1') {
    const { spawn } = await import('node:child_process')
    const st = spawn('strace', ['-c', '-f', '-p', String(pid)], { stdio: ['ignore', 'ignore', 'pipe'] })
    let text = ''
    st.stderr.on('data', (d: Buffer) => { text += d.toString() })
    await new Promise(resolve => setTimeout(resolve, 1000))
    for (let i = 0; i < 500; i++) await nodeGet(proxyUrl)
    st.kill('SIGINT')
    await new Promise(resolve => st.once('exit', resolve))
    lines.push('  syscalls over 500 proxied GETs:', text)
  }
  if (process.env.BENCH_PERF !== undefined) {
    // perf's view of the server's main thread (kernel and native code too; with BENCH_NODE_ARGS=--perf-basic-prof, JS names).
    const { spawn } = await import('node:child_process')
    const perf = spawn('perf', ['record', '-F', '4999', '-g', '-o', process.env.BENCH_PERF, '-p', String(pid)], { stdio: 'ignore' })
    await new Promise(resolve => setTimeout(resolve, 1000))
    lines.push(`  ${M} proxied GETs under perf: ${await window()}`)
    perf.kill('SIGINT')
    await new Promise(resolve => perf.once('exit', resolve))
  }
  if (PROFILE) {
    // BENCH_PROFILE_FILE keeps the profile (for Chrome DevTools or an inclusive-time walk).
    const file = process.env.BENCH_PROFILE_FILE ?? join(dataDir, 'apps.cpuprofile')
    await server.ask({ op: 'cpu-start' })
    const w = await window()
    await server.ask({ op: 'cpu-stop', file })
    lines.push(`  ${M} more, profiled: ${w}`, ...summarizeProfile(JSON.parse(readFileSync(file, 'utf8')), 30))
  }
  await c.close()
})
