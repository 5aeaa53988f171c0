/*
 * (k) before and after a change, in one run (docs/performance.md): two servers up at once, one built from
 * another checkout (a git worktree of the commit before the change, with a sandbox image built from it) and
 * one from this checkout, each with its own chat running the web app of test/fixtures/web-app.ts. Rounds
 * alternate between them (which side goes first flips every round), so that load drift on a shared machine
 * hits both alike: per round and side, 30 keep-alive GETs of `/apps/<chat>/3000/small` with Node's http
 * client, then 30 of `/small` from inside the sandbox (bench/apps.ts insideScript). Each side also reports its
 * server's CPU time (user + system, /proc) over its proxied GETs: per request, summed over the rounds.
 *
 *   npx tsx bench/ab-apps.ts <base checkout> <base image> [image]     AB_ROUNDS=10, AB_PER_ROUND=30; BENCH_NO_BUILD=1 keeps
 *                                                                     both checkouts' dist/ as they are
 *
 * Each side is this file run as a child process (`--side <checkout>`) importing that checkout's bench
 * helpers, so its server, port and prefix are its own.
 */
import { fork, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { Agent, get } from 'node:http'
import { loadavg, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const PER_ROUND = 30

interface Ask { op: 'proxied' | 'inside' | 'stop', n?: number }
interface Answer { ready?: boolean, xs?: number[], cpuMs?: number, error?: string }

/** user + system CPU time of a process so far, ms (clock ticks of 10 ms). */
function cpuMs (pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number)
  return ((f[11] ?? 0) + (f[12] ?? 0)) * 10
}

/** One side: the server of `tree` with its chat and app, answering the parent's asks over IPC. */
async function side (tree: string): Promise<void> {
  const common = await import(join(tree, 'bench/common.ts')) as typeof import('./common.js')
  const { startApp } = await import(join(tree, 'test/fixtures/web-app.ts')) as typeof import('../test/fixtures/web-app.js')
  const { insideScript } = await import(join(tree, 'bench/apps.ts')) as typeof import('./apps.js')
  const keepAlive = new Agent({ keepAlive: true, maxSockets: 1 })
  const nodeGet = async (url: string): Promise<number> => await new Promise((resolve, reject) => {
    const t0 = performance.now()
    get(url, { agent: keepAlive }, res => {
      res.resume()
      res.once('end', () => { if (res.statusCode === 200) resolve(performance.now() - t0); else reject(new Error(`${url}: HTTP ${res.statusCode ?? 0}`)) })
    }).once('error', reject)
  })
  const dataDir = mkdtempSync(join(tmpdir(), 'cubicle-ab-'))
  const server = await common.startServer(dataDir)
  const stop = async (): Promise<void> => {
    await server.stop()
    await common.cleanup()
    rmSync(dataDir, { recursive: true, force: true })
  }
  try {
    const c = await common.client('bench-k')
    await common.bash(c, startApp(3000))
    const url = `${common.BASE}/apps/bench-k/3000/small`
    for (let i = 0; i < 100; i++) await nodeGet(url)
    process.on('message', (m: Ask) => {
      void (async () => {
        if (m.op === 'stop') { await c.close(); await stop(); process.exit(0) }
        const n = m.n ?? PER_ROUND
        const xs: number[] = []
        const pid = server.child.pid ?? 0
        const cpu0 = cpuMs(pid)
        if (m.op === 'proxied') for (let i = 0; i < n; i++) xs.push(await nodeGet(url))
        else xs.push(...JSON.parse((await common.bash(c, insideScript(n))).trim().split('\n')[0] ?? '[]') as number[])
        process.send?.({ xs, cpuMs: cpuMs(pid) - cpu0 } satisfies Answer)
      })().catch((err: Error) => { process.send?.({ error: err.message } satisfies Answer) })
    })
    // The parent gone: this side's server and sandbox go too.
    process.once('disconnect', () => { void stop().finally(() => process.exit(0)) })
    process.send?.({ ready: true } satisfies Answer)
  } catch (err) {
    await stop()
    throw err
  }
}

interface Side { name: string, child: ChildProcess, proxied: number[], inside: number[], cpuMs: number }

async function main (): Promise<void> {
  const [baseTree, baseImage, image = process.env.DOCKER_IMAGE ?? 'computer-use-sandbox:latest'] = process.argv.slice(2)
  if (baseTree === undefined || baseImage === undefined) throw new Error('usage: npx tsx bench/ab-apps.ts <base checkout> <base image> [image]')
  const self = fileURLToPath(import.meta.url)
  const start = (name: string, tree: string, img: string): Side => ({
    name,
    child: fork(self, ['--side', tree], { execArgv: ['--import', 'tsx'], cwd: tree, env: { ...process.env, DOCKER_IMAGE: img } }),
    proxied: [],
    inside: [],
    cpuMs: 0
  })
  const sides = [start('before', resolve(baseTree), baseImage), start('after', resolve(fileURLToPath(new URL('..', import.meta.url))), image)]
  const next = async (s: Side): Promise<Answer> => await new Promise((resolve, reject) => {
    const onExit = (code: number | null): void => { s.child.off('message', onMessage); reject(new Error(`${s.name} exited (${code ?? 'signal'})`)) }
    const onMessage = (a: Answer): void => {
      s.child.off('exit', onExit)
      if (a.error !== undefined) reject(new Error(`${s.name}: ${a.error}`)); else resolve(a)
    }
    s.child.once('message', onMessage)
    s.child.once('exit', onExit)
  })
  const ask = async (s: Side, m: Ask): Promise<number[]> => {
    const answer = next(s)
    s.child.send(m)
    const a = await answer
    if (m.op === 'proxied') s.cpuMs += a.cpuMs ?? 0
    return a.xs ?? []
  }
  const perRound = Number(process.env.AB_PER_ROUND ?? PER_ROUND)
  const median = (xs: number[]): number => { const a = [...xs].sort((x, y) => x - y); return a[Math.floor(a.length / 2)] ?? NaN }
  try {
    await Promise.all(sides.map(next))
    const load0 = loadavg()[0] ?? 0
    const rounds = Number(process.env.AB_ROUNDS ?? 10)
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? sides : [...sides].reverse()
      for (const s of order) s.proxied.push(...await ask(s, { op: 'proxied', n: perRound }))
      for (const s of order) s.inside.push(...await ask(s, { op: 'inside', n: perRound }))
    }
    for (const s of sides) console.log(`${s.name}: proxied ${median(s.proxied).toFixed(3)} ms ÷ inside ${median(s.inside).toFixed(3)} ms = ${(median(s.proxied) / median(s.inside)).toFixed(2)} (${s.proxied.length} each, median); server CPU ${(s.cpuMs / s.proxied.length).toFixed(3)} ms per proxied request`)
    const [before, after] = sides as [Side, Side]
    console.log(`after ÷ before, proxied: ${(median(after.proxied) / median(before.proxied)).toFixed(3)}, server CPU: ${(after.cpuMs / before.cpuMs).toFixed(3)}; load average ${load0.toFixed(1)} → ${(loadavg()[0] ?? 0).toFixed(1)}`)
  } finally {
    await Promise.all(sides.map(async s => {
      if (s.child.exitCode !== null || s.child.signalCode !== null) return
      const gone = new Promise(resolve => s.child.once('exit', resolve))
      s.child.send({ op: 'stop' } satisfies Ask)
      await gone
    }))
  }
}

if (process.argv[2] === '--side') side(process.argv[3] ?? '.').catch(err => { console.error(err); process.exit(1) })
else main().catch(err => { console.error(err); process.exitCode = 1 })
