/*
 * The frame of the before/after benches (bench/ab-apps.ts, bench/ab-call.ts): two servers up at once, one
 * built from another checkout (the commit before the change, with a sandbox image built from it) and one
 * from this checkout. Each side is the bench file itself run as a child process (`--side <checkout>`)
 * importing that checkout's bench helpers, so its server, port and prefix are its own; the parent asks
 * each side for rounds of measurements over IPC and gets them with its server's CPU time (user + system,
 * /proc, thread pool included) over them.
 */
import { fork, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import type * as Common from './common.js'

/** What the parent asks a side: `n` measurements of kind `op`, or to stop. */
export interface Ask { op: string, n?: number }
interface Answer { ready?: boolean, xs?: number[], cpuMs?: number, error?: string }

/** user + system CPU time of a process so far, ms (clock ticks of 10 ms). */
export function cpuMs (pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number)
  return ((f[11] ?? 0) + (f[12] ?? 0)) * 10
}

export const median = (xs: number[]): number => { const a = [...xs].sort((x, y) => x - y); return a[Math.floor(a.length / 2)] ?? NaN }

/** What a side measures: ms per ask's `n` measurements; `close` before its server stops. */
export interface SideBench { measure: (m: Ask) => Promise<number[]>, close: () => Promise<void> }

/**
 * One side: the server of `tree` on a fresh DATA_DIR; `prepare` sets up its chat and says how to measure.
 * Answers the parent's asks until it says stop or goes away (the server and its sandboxes go too).
 */
export async function runSide (tree: string, prepare: (common: typeof Common, server: Common.Server) => Promise<SideBench>, poolSize?: number): Promise<void> {
  const common = await import(join(tree, 'bench/common.ts')) as typeof Common
  const dataDir = mkdtempSync(join(tmpdir(), 'cubicle-ab-'))
  const server = await common.startServer(dataDir, poolSize)
  const stop = async (): Promise<void> => {
    await server.stop()
    await common.cleanup()
    rmSync(dataDir, { recursive: true, force: true })
  }
  try {
    const bench = await prepare(common, server)
    process.on('message', (m: Ask) => {
      void (async () => {
        if (m.op === 'stop') { await bench.close(); await stop(); process.exit(0) }
        const pid = server.child.pid ?? 0
        const cpu0 = cpuMs(pid)
        const xs = await bench.measure(m)
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

/** A side as the parent sees it: its measurements and its server's CPU ms, by `op`. */
export interface Side { name: 'before' | 'after', child: ChildProcess, xs: Record<string, number[]>, cpuMs: Record<string, number> }

/**
 * The parent: forks `self` as the two sides (before: `<base checkout>` with `<base image>`, after: this
 * checkout with `[image]`, from `args`), runs `body` with `ask` (which records each answer on its side),
 * then stops both.
 */
export async function runSides (self: string, args: string[], usage: string,
  body: (sides: [Side, Side], ask: (s: Side, m: Ask) => Promise<void>) => Promise<void>): Promise<void> {
  const [baseTree, baseImage, image = process.env.DOCKER_IMAGE ?? 'computer-use-sandbox:latest'] = args
  if (baseTree === undefined || baseImage === undefined) throw new Error(`usage: ${usage}`)
  const start = (name: Side['name'], tree: string, img: string): Side => ({
    name,
    child: fork(self, ['--side', tree], { execArgv: ['--import', 'tsx'], cwd: tree, env: { ...process.env, DOCKER_IMAGE: img } }),
    xs: {},
    cpuMs: {}
  })
  const sides: [Side, Side] = [start('before', resolve(baseTree), baseImage), start('after', resolve(fileURLToPath(new URL('..', import.meta.url))), image)]
  const next = async (s: Side): Promise<Answer> => await new Promise((resolve, reject) => {
    const onExit = (code: number | null): void => { s.child.off('message', onMessage); reject(new Error(`${s.name} exited (${code ?? 'signal'})`)) }
    const onMessage = (a: Answer): void => {
      s.child.off('exit', onExit)
      if (a.error !== undefined) reject(new Error(`${s.name}: ${a.error}`)); else resolve(a)
    }
    s.child.once('message', onMessage)
    s.child.once('exit', onExit)
  })
  const ask = async (s: Side, m: Ask): Promise<void> => {
    const answer = next(s)
    s.child.send(m)
    const a = await answer
    s.cpuMs[m.op] = (s.cpuMs[m.op] ?? 0) + (a.cpuMs ?? 0)
    s.xs[m.op] = [...s.xs[m.op] ?? [], ...a.xs ?? []]
  }
  try {
    await Promise.all(sides.map(next))
    await body(sides, ask)
  } finally {
    await Promise.all(sides.map(async s => {
      if (s.child.exitCode !== null || s.child.signalCode !== null) return
      const gone = new Promise(resolve => s.child.once('exit', resolve))
      s.child.send({ op: 'stop' } satisfies Ask)
      await gone
    }))
  }
}
