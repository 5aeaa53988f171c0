/*
 * The sandbox image's `job` command (sandbox-image/job/job, docs/features.md#background-jobs), run by the
 * host's python3 with a temporary HOME: no Docker needed. Its life in a real sandbox, through bash_tool,
 * is test/integration/jobs.test.ts. Job names carry the prefix hj- (and the script's own directory id keeps
 * its `job stop` off any other home's job): this file may run beside that one, whose sandbox's processes the host sees.
 */
import { spawn, spawnSync } from 'node:child_process'
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import t from 'tap'
import { freePort } from '../helper.js'

const SCRIPT = resolve(import.meta.dirname, '../../sandbox-image/job/job')
const python = spawnSync('python3', ['-c', 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)']).status === 0
const skip = python && process.platform === 'linux' ? false : 'python3 ≥ 3.9 on Linux is missing on this host'
const sleep = async (ms: number): Promise<void> => await new Promise(resolve => setTimeout(resolve, ms))

interface Run { code: number | null, out: string, err: string }
interface JobInfo { name: string, state: string, pid: number | null, exit_code: number | null, signal: number | null, restarts: number, ports: Array<{ address: string, port: number }>, command: string[] | null, reason?: string }

const home = await mkdtemp(join(tmpdir(), 'job-home-'))
t.teardown(async () => {
  // Whatever a failed test left running: every job's processes carry CUBICLE_JOB.
  for (const name of await readdir(join(home, '.cubicle', 'jobs')).catch(() => [])) await job(['stop', name])
  await rm(home, { recursive: true, force: true })
})

async function job (args: string[], env: Record<string, string> = {}, cwd = home): Promise<Run> {
  return await new Promise((resolve, reject) => {
    const child = spawn('python3', ['-I', SCRIPT, ...args], { cwd, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    child.stdout.on('data', (b: Buffer) => { out += b.toString() })
    child.stderr.on('data', (b: Buffer) => { err += b.toString() })
    child.on('error', reject)
    child.on('close', code => { resolve({ code, out, err }) })
  })
}

async function info (name: string): Promise<JobInfo> {
  const r = await job(['list', '--json', name])
  return (JSON.parse(r.out) as JobInfo[])[0] as JobInfo
}

async function until (what: string, check: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await sleep(100)
  }
}

/** Running, not a zombie waiting for whichever process inherited it. */
const alive = async (pid: number): Promise<boolean> => {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '')
  return stat !== '' && !/^[ZX]$/.test(stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3))
}
const environOf = async (pid: number): Promise<string[]> => (await readFile(`/proc/${pid}/environ`)).toString().split('\0')
const sessionOf = async (pid: number): Promise<number> => {
  const stat = (await readFile(`/proc/${pid}/stat`)).toString()
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[3])
}

t.test('bad input gets a clear error and exit status 2', { skip }, async t => {
  for (const bad of ['Web', '-x', 'a'.repeat(33), '../x', 'a b', '', 'a.b']) {
    const r = await job(['start', '--name', bad, '--', 'true'])
    t.equal(r.code, 2, `name ${JSON.stringify(bad)}`)
    t.match(r.err, /^job: (invalid job name|unknown option)/)
  }
  t.match((await job(['start', '--name', 'x'])).err, /no job named x: start it with a command/)
  t.match((await job(['start', '--name', 'x', '--'])).err, /no command after --/)
  t.match((await job(['start', '--name', 'x', '--restart', 'always', '--', 'true'])).err, /--restart is "no" or "on-failure"/)
  t.match((await job(['start', '--name', 'x', '--env', 'A B=1', '--', 'true'])).err, /--env takes KEY=VALUE/)
  t.match((await job(['start', '--name', 'x', '--env', 'CUBICLE_EXEC_ID=1', '--', 'true'])).err, /--env cannot set CUBICLE_EXEC_ID/)
  t.match((await job(['start', '--name', 'x', '--wait-port', '70000', '--', 'true'])).err, /--wait-port must be between 1 and 65535/)
  t.match((await job(['start', '--name', 'x', 'python3', 'app.py'])).err, /put the command after --/)
  t.match((await job(['logs', 'nope'])).err, /no job named nope/)
  t.match((await job(['frob'])).err, /unknown command 'frob'/)
  const failed = await job(['start', '--name', 'hj-missing', '--', 'no-such-command-here'])
  t.equal(failed.code, 1)
  t.match(failed.err, /cannot run 'no-such-command-here' in .*No such file or directory/)
  t.match(await info('hj-missing'), { state: 'failed', exit_code: 127 })
})

t.test('a server job: detached from its caller, listed with its port, logs by offset, stopped', { skip }, async t => {
  const port = await freePort()
  const r = await job(['start', '--name', 'hj-web', '--env', 'GREETING=hi', '--wait-port', String(port), '--',
    'python3', '-c', `import http.server, os; print('greeting', os.environ['GREETING']); http.server.HTTPServer(('127.0.0.1', ${port}), http.server.SimpleHTTPRequestHandler).serve_forever()`],
  { CUBICLE_EXEC_ID: 'feedbeef01' })
  t.equal(r.code, 0, r.err)
  t.match(r.out, new RegExp(`^job hj-web started \\(pid \\d+\\): python3 -c .*\\njob hj-web listens on port ${port}\\n`))
  const webInfo = await info('hj-web')
  t.match(webInfo, { state: 'running', exit_code: null, restarts: 0, ports: [{ address: '127.0.0.1', port }] })
  const pid = webInfo.pid as number
  const env = await environOf(pid)
  t.notOk(env.some(e => e.startsWith('CUBICLE_EXEC_ID=')), 'the exec marker of the caller is not passed on (a bash_tool timeout cannot kill the job)')
  t.ok(env.includes('CUBICLE_JOB=hj-web') && env.includes('GREETING=hi') && env.includes('PYTHONUNBUFFERED=1'))
  t.equal(await sessionOf(pid), pid, 'the job leads its own session')
  t.match((await job(['start', '--name', 'hj-web', '--', 'true'])).err, /job hj-web is already running \(job stop hj-web, or job restart hj-web\)/)

  const res = await fetch(`http://127.0.0.1:${port}/`)
  t.equal(res.status, 200)
  await until('the request in the log', async () => (await job(['logs', 'hj-web'])).out.includes('"GET / HTTP/1.1" 200'))
  const logs = await job(['logs', 'hj-web'])
  t.match(logs.out, /^\[job [^\]]+ UTC\] started pid \d+: python3 -c .*\ngreeting hi\n/)
  const next = /--since (\d+)\]\n$/.exec(logs.err)
  t.ok(next, logs.err)
  t.equal((await job(['logs', 'hj-web', '--since', next?.[1] ?? '0'])).out, '', 'nothing new since the offset')
  await fetch(`http://127.0.0.1:${port}/again`)
  await until('the second request', async () => (await job(['logs', 'hj-web', '--since', next?.[1] ?? '0'])).out.includes('/again'))
  t.match((await job(['logs', 'hj-web', '--tail', '1'])).out, /^[^\n]*GET \/again[^\n]*\n$/)
  const list = await job(['list'])
  t.match(list.out, new RegExp(`^NAME +STATE +PID +EXIT +RESTARTS +PORTS +SINCE +COMMAND\\n(hj-missing .*\\n)?hj-web +running +${pid} +- +0 +${port} `, 'm'))

  const stop = await job(['stop', 'hj-web'])
  t.equal(stop.out, 'job hj-web stopped (its main process ended with SIGTERM)\n')
  t.notOk(await alive(pid))
  t.match(await info('hj-web'), { state: 'stopped', pid: null, signal: 15, ports: [] })
  t.match((await job(['logs', 'hj-web', '--tail', '1'])).out, /stopped \(job stop\)\n$/)
  t.equal((await job(['stop', 'hj-web'])).out, 'job hj-web was not running\n')

  // Started again from the saved command, directory and --env.
  const again = await job(['start', 'hj-web', '--wait-port', String(port)], {}, '/')
  t.equal(again.code, 0, again.err)
  t.match((await job(['logs', 'hj-web'])).out, /greeting hi\n[\s\S]*greeting hi\n/)
  t.match(await job(['restart', 'hj-web']), { code: 0, out: /^job hj-web started/ })
  t.equal((await job(['rm', 'hj-web'])).code, 1, 'a running job is not removed')
  await job(['stop', 'hj-web'])
  t.equal((await job(['rm', 'hj-web'])).out, 'job hj-web removed\n')
  t.equal((await job(['logs', 'hj-web'])).code, 1)
})

t.test('on-failure restarts with a growing delay, then runs; a clean exit is not restarted', { skip }, async t => {
  const counter = join(home, 'runs')
  await writeFile(counter, '')
  const started = Date.now()
  const r = await job(['start', '--name', 'hj-flaky', '--restart', 'on-failure', '--', 'sh', '-c', `echo run >> ${counter}; [ $(wc -l < ${counter}) -ge 3 ] || exit 3; sleep 300`])
  t.equal(r.code, 1, 'the first run failed at once')
  t.match(r.err, /job hj-flaky exited with code 3 at once and will be restarted; the end of its log:\n[\s\S]*restarting in 1 s \(1 of at most 10 failed starts in a row\)/)
  await until('the third run', async () => (await info('hj-flaky')).state === 'running' && (await info('hj-flaky')).restarts === 2)
  const elapsed = Date.now() - started
  t.ok(elapsed >= 2900, `waited 1 s + 2 s before the restarts (${elapsed} ms)`)
  const log = (await job(['logs', 'hj-flaky'])).out
  t.match(log, /restarting in 1 s[\s\S]*restarting in 2 s[\s\S]*started pid \d+ \(restart 2\)/)
  await job(['stop', 'hj-flaky'])

  t.equal((await job(['start', '--name', 'hj-once', '--restart', 'on-failure', '--', 'sh', '-c', 'sleep 1.2; echo done'])).code, 0)
  await until('its exit', async () => (await info('hj-once')).state === 'exited')
  t.match(await info('hj-once'), { exit_code: 0, restarts: 0 })

  t.equal((await job(['start', '--name', 'hj-giveup', '--restart', 'on-failure', '--max-restarts', '1', '--', 'sh', '-c', 'sleep 1.1; exit 4'])).code, 0)
  await until('giving up', async () => (await info('hj-giveup')).state === 'failed', 20_000)
  t.match((await job(['logs', 'hj-giveup'])).out, /2 failed starts in a row, not restarting \(job start hj-giveup tries again\)/)
})

t.test('stop: SIGKILL after the grace for what ignores SIGTERM; the main process exiting ends the rest', { skip }, async t => {
  t.equal((await job(['start', '--name', 'hj-stubborn', '--', 'bash', '-c', 'trap "" TERM; sleep 300 & wait; sleep 300'])).code, 0)
  const pids = async (): Promise<number> => Number(spawnSync('sh', ['-c', 'grep -lzx CUBICLE_JOB=hj-stubborn /proc/[0-9]*/environ 2>/dev/null | wc -l']).stdout.toString())
  t.equal(await pids(), 2, 'bash and its sleep')
  const t0 = Date.now()
  const stop = await job(['stop', 'hj-stubborn'])
  const took = Date.now() - t0
  t.match(stop.out, /job hj-stubborn stopped/)
  t.ok(took >= 4500 && took < 12_000, `TERM, then KILL after 5 s (${took} ms)`)
  t.equal(await pids(), 0, 'nothing left')

  // The main process exits at once and leaves a child behind: the child is ended with it.
  t.match(await job(['start', '--name', 'hj-leaver', '--', 'sh', '-c', 'sleep 300 & echo left']), { code: 0, out: /job hj-leaver finished at once with exit code 0; the end of its log:\n.*\nleft\n/ })
  await until('no process of hj-leaver', async () => Number(spawnSync('sh', ['-c', 'grep -lzx CUBICLE_JOB=hj-leaver /proc/[0-9]*/environ 2>/dev/null | wc -l']).stdout.toString()) === 0)
  t.match(await info('hj-leaver'), { state: 'exited', exit_code: 0 })
})

t.test('a killed supervisor leaves orphans that list shows and stop ends; start races have one winner', { skip }, async t => {
  t.equal((await job(['start', '--name', 'hj-orph', '--', 'sleep', '300'])).code, 0)
  const state = JSON.parse(await readFile(join(home, '.cubicle', 'jobs', 'hj-orph', 'state.json'), 'utf8')) as { supervisor: number, pid: number }
  process.kill(state.supervisor, 'SIGKILL')
  await until('the lock released', async () => (await info('hj-orph')).state === 'orphaned')
  t.match(await info('hj-orph'), { reason: /1 processes left without a supervisor \(job stop hj-orph ends them\)/ })
  t.match((await job(['stop', 'hj-orph'])).out, /job hj-orph was not running; ended 1 processes it had left behind/)
  t.notOk(await alive(state.pid))
  t.match(await info('hj-orph'), { state: 'stopped', reason: 'its supervisor was killed' })
  t.match((await job(['list'])).out, /hj-orph: stopped: its supervisor was killed; job start hj-orph starts it again/)

  const racers = await Promise.all([1, 2, 3].map(async () => await job(['start', '--name', 'hj-race', '--', 'sleep', '300'])))
  t.equal(racers.filter(r => r.code === 0).length, 1, 'one start wins')
  for (const r of racers.filter(r => r.code !== 0)) t.match(r.err, /already running/)
  await job(['stop', 'hj-race'])
})

t.test("stop signals only its own jobs directory's processes, not another one's job of the same name", { skip }, async t => {
  // Another home's job (another sandbox's, seen through this host's /proc) named the same: its markers carry another id.
  const foreign = spawn('sleep', ['300'], { env: { CUBICLE_JOB: 'hj-twin', CUBICLE_JOB_OWNER: 'f'.repeat(32) }, stdio: 'ignore' })
  t.teardown(() => { foreign.kill('SIGKILL') })
  const orphan = spawn('sleep', ['300'], { env: { CUBICLE_JOB: 'hj-twin' }, stdio: 'ignore' })
  t.teardown(() => { orphan.kill('SIGKILL') })
  await until('the strangers running', async () => await alive(foreign.pid as number) && await alive(orphan.pid as number))
  t.equal((await job(['start', '--name', 'hj-twin', '--', 'sleep', '300'])).code, 0)
  const own = (await info('hj-twin')).pid as number
  t.ok((await environOf(own)).some(kv => /^CUBICLE_JOB_OWNER=[0-9a-f]{32}$/.test(kv)), 'the job carries its directory id')
  t.match((await job(['stop', 'hj-twin'])).out, /^job hj-twin stopped/)
  t.notOk(await alive(own), 'its own process ended')
  t.ok(await alive(foreign.pid as number), "another directory's process of the same name lives on")
  t.ok(await alive(orphan.pid as number), 'a process with the name but no directory id lives on')
  t.match(await info('hj-twin'), { state: 'stopped', ports: [] })
})

t.test('the log is capped: two files of 2 MiB, offsets keep counting', { skip }, async t => {
  // 5 MiB of output in lines of 1 KiB.
  const r = await job(['start', '--name', 'hj-flood', '--', 'python3', '-c', "import sys\nfor i in range(5120): sys.stdout.write(f'{i:08d}' + 'x' * 1015 + '\\n')"])
  t.equal(r.code, 0, r.err)
  await until('the flood written', async () => (await info('hj-flood')).state === 'exited')
  const dir = join(home, '.cubicle', 'jobs', 'hj-flood')
  const files = (await readdir(dir)).filter(f => f.startsWith('output.')).sort()
  t.equal(files.length, 2)
  const all = await job(['logs', 'hj-flood', '--since', '0'])
  t.match(all.err, /^\n?\[job logs hj-flood: bytes 0-\d+ were rotated away; bytes (\d+)-(\d+); /)
  const [, from, to] = /bytes (\d+)-(\d+);/.exec(all.err) ?? []
  t.ok(Number(to) > 5 * 1024 * 1024 && Number(to) - Number(from) <= 4 * 1024 * 1024, `retained ${from}-${to}`)
  t.equal(Buffer.byteLength(all.out), Number(to) - Number(from))
  t.match(all.out, /\n00005119x+\n\[job [^\]]+\] exited with code 0\n$/)
  const tail = await job(['logs', 'hj-flood', '--tail', '2'])
  t.match(tail.out, /^00005119x+\n\[job [^\]]+\] exited with code 0\n$/)
})
