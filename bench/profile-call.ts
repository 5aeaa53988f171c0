/*
 * Where a warm bash_tool call spends its time (goal (a) of bench/run.ts), measured: one chat's `echo`
 * calls alternate in blocks of 10 with raw dockerode execs in the same container, as (a) does; then, over
 * calls alone, the server's CPU per call (utime + stime of its process, thread pool included), the write
 * system calls it makes per call (/proc/<pid>/io), and its V8 CPU profile (bench/cpu.ts). Per-step times
 * inside the server need marks in its code, which the sources do not carry: docs/performance.md says
 * where they went when they were measured.
 *
 *   npx tsx bench/profile-call.ts          60 calls and 60 raw execs, then 300 calls profiled
 *   BENCH_CALLS=120 (default 60); BENCH_CPU_INTERVAL_US=100 samples finer (default V8's 1000 µs)
 *   BENCH_STRACE=1 also writes the server's system calls during three calls to $TMPDIR/cubicle-call.strace
 */
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { bash, chatContainer, client, docker, median, ms, now, profileSession, rawExec, sleep, type Server } from './common.js'
import { summarizeProfile } from './cpu.js'

const CALLS = Number(process.env.BENCH_CALLS ?? 60)
const PROFILED = 300

/** utime + stime of a process (its threads included), ms. */
function cpuMs (pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number)
  return ((f[11] ?? 0) + (f[12] ?? 0)) * 10
}

/** Write system calls a process made so far. */
const writeCalls = (pid: number): number => Number(/^syscw: (\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))?.[1] ?? NaN)

async function strace (server: Server, call: () => Promise<void>): Promise<string> {
  const file = join(tmpdir(), 'cubicle-call.strace')
  const st = spawn('strace', ['-f', '-tt', '-s', '80', '-p', String(server.child.pid), '-o', file], { stdio: 'ignore' })
  await sleep(1500)
  for (let i = 0; i < 3; i++) { await call(); await sleep(100) }
  st.kill('SIGINT')
  await sleep(500)
  return file
}

await profileSession(undefined, async (server, lines, dataDir) => {
  const pid = server.child.pid ?? 0
  const c = await client('bench-call')
  await bash(c, 'true')
  const info = await chatContainer('bench-call')
  if (info === undefined) throw new Error('the chat has no sandbox')
  const container = docker.getContainer(info.Id)
  for (let i = 0; i < 10; i++) await bash(c, 'echo hi')
  const viaMcp: number[] = []
  const viaRaw: number[] = []
  for (let r = 0; r < CALLS / 10; r++) {
    for (let i = 0; i < 10; i++) { const t0 = now(); await bash(c, 'echo hi'); viaMcp.push(now() - t0) }
    for (let i = 0; i < 10; i++) { const t0 = now(); await rawExec(container, ['echo', 'hi']); viaRaw.push(now() - t0) }
  }
  lines.push(`bash_tool echo ${ms(median(viaMcp))} ÷ raw exec ${ms(median(viaRaw))} = ${(median(viaMcp) / median(viaRaw)).toFixed(3)} (medians of ${viaMcp.length})`)
  await server.ask({ op: 'cpu-start' })
  const cpu0 = cpuMs(pid)
  const writes0 = writeCalls(pid)
  const t0 = now()
  for (let i = 0; i < PROFILED; i++) await bash(c, 'echo hi')
  const wallMs = now() - t0
  const cpu = cpuMs(pid) - cpu0
  const writes = writeCalls(pid) - writes0
  const file = join(dataDir, 'cpu.json')
  await server.ask({ op: 'cpu-stop', file })
  lines.push(`${PROFILED} calls alone, profiled: ${ms(wallMs / PROFILED)} each; server CPU ${ms(cpu / PROFILED)} per call (${(100 * cpu / wallMs / cpus().length).toFixed(0)} % of the machine), ${(writes / PROFILED).toFixed(1)} write system calls per call`)
  lines.push(...summarizeProfile(JSON.parse(readFileSync(file, 'utf8')), 20))
  if (process.env.BENCH_STRACE === '1') lines.push(`system calls of three calls: ${await strace(server, async () => { await bash(c, 'echo hi') })}`)
  await c.close()
})
