/*
 * (a) before and after a change, in one run (docs/performance.md): two servers up at once, one built from
 * another checkout (the commit before the change, with a sandbox image built from it) and one from this
 * checkout, each with its own chat. Rounds alternate between them (which side goes first flips every round),
 * so that load drift on a shared machine hits both alike: per round and side, AB_PER_ROUND warm `echo hi`
 * bash_tool calls, then as many raw dockerode execs in the same container (the goal's divisor). Each side also
 * reports its server's CPU time (user + system, /proc, thread pool included) over its calls.
 *
 *   npx tsx bench/ab-call.ts <base checkout> <base image> [image]     AB_ROUNDS=10, AB_PER_ROUND=20; BENCH_NO_BUILD=1 keeps
 *                                                                     both checkouts' dist/ as they are
 *
 * Each side is this file run as a child process (`--side <checkout>`) importing that checkout's bench
 * helpers, so its server, port and prefix are its own.
 */
import { fork, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const PER_ROUND = 20

interface Ask { op: 'calls' | 'raw' | 'stop', n?: number }
interface Answer { ready?: boolean, xs?: number[], cpuMs?: number, error?: string }

/** user + system CPU time of a process so far, ms (clock ticks of 10 ms). */
function cpuMs (pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number)
  return ((f[11] ?? 0) + (f[12] ?? 0)) * 10
}

/** One side: the server of `tree` with its chat, answering the parent's asks over IPC. */
async function side (tree: string): Promise<void> {
  const common = await import(join(tree, 'bench/common.ts')) as typeof import('./common.js')
  const dataDir = mkdtempSync(join(tmpdir(), 'cubicle-ab-'))
  const server = await common.startServer(dataDir)
  const stop = async (): Promise<void> => {
    await server.stop()
    await common.cleanup()
    rmSync(dataDir, { recursive: true, force: true })
  }
  try {
    const c = await common.client('bench-ab-call')
    await common.bash(c, 'true')
    const info = await common.chatContainer('bench-ab-call')
    if (info === undefined) throw new Error('the chat has no sandbox')
    const container = common.docker.getContainer(info.Id)
    for (let i = 0; i < 20; i++) await common.bash(c, 'echo hi')
    process.on('message', (m: Ask) => {
      void (async () => {
        if (m.op === 'stop') { await c.close(); await stop(); process.exit(0) }
        const n = m.n ?? PER_ROUND
        const xs: number[] = []
        const pid = server.child.pid ?? 0
        const cpu0 = cpuMs(pid)
        for (let i = 0; i < n; i++) {
          const t0 = performance.now()
          if (m.op === 'calls') await common.bash(c, 'echo hi'); else await common.rawExec(container, ['echo', 'hi'])
          xs.push(performance.now() - t0)
        }
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

interface Side { name: string, child: ChildProcess, calls: number[], raw: number[], cpuMs: number }

async function main (): Promise<void> {
  const [baseTree, baseImage, image = process.env.DOCKER_IMAGE ?? 'computer-use-sandbox:latest'] = process.argv.slice(2)
  if (baseTree === undefined || baseImage === undefined) throw new Error('usage: npx tsx bench/ab-call.ts <base checkout> <base image> [image]')
  const self = fileURLToPath(import.meta.url)
  const start = (name: string, tree: string, img: string): Side => ({
    name,
    child: fork(self, ['--side', tree], { execArgv: ['--import', 'tsx'], cwd: tree, env: { ...process.env, DOCKER_IMAGE: img } }),
    calls: [],
    raw: [],
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
    if (m.op === 'calls') s.cpuMs += a.cpuMs ?? 0
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
      for (const s of order) s.calls.push(...await ask(s, { op: 'calls', n: perRound }))
      for (const s of order) s.raw.push(...await ask(s, { op: 'raw', n: perRound }))
    }
    for (const s of sides) console.log(`${s.name}: bash_tool echo ${median(s.calls).toFixed(2)} ms ÷ raw exec ${median(s.raw).toFixed(2)} ms = ${(median(s.calls) / median(s.raw)).toFixed(3)} (${s.calls.length} each, median); server CPU ${(s.cpuMs / s.calls.length).toFixed(2)} ms per call`)
    const [before, after] = sides as [Side, Side]
    console.log(`after ÷ before, call: ${(median(after.calls) / median(before.calls)).toFixed(3)}, server CPU: ${(after.cpuMs / before.cpuMs).toFixed(3)}; load average ${load0.toFixed(1)} → ${(loadavg()[0] ?? 0).toFixed(1)}`)
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
