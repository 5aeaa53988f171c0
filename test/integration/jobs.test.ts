/*
 * Background jobs in a real sandbox (docs/features.md#background-jobs), driven the way the model does:
 * `job` commands through bash_tool over MCP. A job outlives the bash_tool timeout that kills everything
 * else the command started, lists its listening port, keeps running across a server restart, is listed as
 * stopped after a sandbox stop and starts again with its saved command. The command's own corner cases
 * (validation, backoff, SIGKILL after the grace, log cap) are test/integration/job-command.test.ts, which
 * runs the script on the host: its `job stop` signals only processes carrying its own home's directory id
 * (CUBICLE_JOB_OWNER) and its job names differ from these, so the two files may run side by side.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { randomBytes } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import type { CoreSandboxService } from '../../plugins/sandbox/service.js'
import { listen } from '../helper.js'
import { bash, client, textOf, toolsManifest } from '../plugins/workspace-tools/integration-app.js'
import { dockerOrSkip, removeByPrefix, TEST_IMAGE, testDockerClient } from './docker.js'

const gate = await dockerOrSkip()
const sleep = async (ms: number): Promise<void> => await new Promise(resolve => setTimeout(resolve, ms))

interface JobInfo { name: string, state: string, pid: number | null, exit_code: number | null, restarts: number, ports: Array<{ address: string, port: number }>, reason?: string }

const prefix = `t-${randomBytes(4).toString('hex')}`
const dataDir = await mkdtemp(join(tmpdir(), 'jobs-data-'))
const chat = `jobs-${randomBytes(3).toString('hex')}`

/** A server on the shared prefix and data dir, closed when `t` ends (a restart is a second one). */
async function server (t: Test, env: Record<string, string> = {}): Promise<{ c: Client, sandbox: CoreSandboxService }> {
  const { app, url } = await listen(t, { SANDBOX_PREFIX: prefix, DATA_DIR: dataDir, DOCKER_IMAGE: TEST_IMAGE, COMMAND_TIMEOUT: '4', ENABLE_NETWORK: 'false', ...env }, toolsManifest)
  return { c: await client(t, url, chat), sandbox: app.sandbox as CoreSandboxService }
}

async function sh (c: Client, command: string): Promise<string> {
  return textOf(await bash(c, command, 'jobs test'))
}

async function jobs (c: Client): Promise<Record<string, JobInfo>> {
  const text = await sh(c, 'job list --json')
  const list = JSON.parse(text.slice(0, text.lastIndexOf(']') + 1)) as JobInfo[]
  return Object.fromEntries(list.map(j => [j.name, j]))
}

async function until (what: string, check: () => Promise<boolean>, ms = 30_000): Promise<void> {
  const end = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await sleep(300)
  }
}

t.test('background jobs through bash_tool', gate, async t => {
  t.teardown(async () => {
    await removeByPrefix(prefix)
    await rm(dataDir, { recursive: true, force: true })
  })
  let webPid = 0

  await t.test('jobs outlive the bash_tool timeout, list their ports, log, stop and restart on failure', async t => {
    const { c } = await server(t)
    const description = (await c.listTools()).tools.find(tool => tool.name === 'bash_tool')?.description ?? ''
    t.match(description, 'job start --name web -- npm run dev')
    t.notMatch(description, /nohup/)
    t.match(await sh(c, 'head -n 3 /mnt/skills/public/job/SKILL.md'), /^---\nname: job\ndescription: /)

    const started = await sh(c, 'mkdir -p ~/site && echo hello > ~/site/index.html && job start --name web --cwd ~/site --wait-port 8000 -- python3 -m http.server 8000 --bind 127.0.0.1')
    t.match(started, /^job web started \(pid \d+\): python3 -m http\.server 8000 --bind 127\.0\.0\.1\njob web listens on port 8000\n/)

    // The command times out (COMMAND_TIMEOUT 4 s): what it put in the background with nohup is
    // killed with it, the job it started is not.
    const timedOut = await bash(c, 'job start --name ticker -- sh -c "while :; do date +%s; sleep 1; done" && (nohup sleep 611 >/dev/null 2>&1 &) && sleep 60', 'jobs test')
    t.match(textOf(timedOut), /\[Command timed out after 4 seconds\]/)
    await until('the timed-out command\'s nohup child is gone', async () => (await sh(c, 'pgrep -cf "^sleep 611" || true')).startsWith('0'))
    const list = await jobs(c)
    t.match(list.ticker, { state: 'running', restarts: 0 }, 'the job survived the timeout')
    t.match(list.web, { state: 'running', ports: [{ address: '127.0.0.1', port: 8000 }] })
    webPid = list.web?.pid ?? 0
    t.ok(webPid > 1)
    t.match(await sh(c, 'job list'), new RegExp(`web +running +${webPid} +- +0 +8000 `))

    t.equal(await sh(c, 'curl -s http://127.0.0.1:8000/index.html'), 'hello\n')
    t.match(await sh(c, 'job logs web --tail 1'), /"GET \/index\.html HTTP\/1\.1" 200 -\n\[job logs web: bytes \d+-(\d+); newer output: job logs web --since \1\]\n$/)
    const tick = await sh(c, 'job logs ticker --tail 2')
    t.match(tick, /^\d{10}\n\d{10}\n\[job logs ticker/, 'the ticker keeps writing its log')

    t.match(await sh(c, 'job stop ticker; grep -lzx CUBICLE_JOB=ticker /proc/[0-9]*/environ 2>/dev/null | wc -l'), /^job ticker stopped \(its main process ended with SIGTERM\)\n0\n$/)

    // Fails on its first run, runs on the second (after the 1 s backoff).
    const flaky = await sh(c, 'job start --name flaky --restart on-failure -- sh -c \'echo try >> ~/tries; [ "$(wc -l < ~/tries)" -ge 2 ] || exit 1; exec sleep 600\'; echo rc=$?')
    t.match(flaky, /job flaky exited with code 1 at once and will be restarted[\s\S]*rc=1/)
    await until('flaky running again', async () => { const j = (await jobs(c)).flaky; return j?.state === 'running' && j.restarts === 1 })
  })

  await t.test('a server restart leaves the jobs running', async t => {
    const { c } = await server(t)
    const list = await jobs(c)
    t.match(list.web, { state: 'running', pid: webPid, ports: [{ port: 8000 }] }, 'the same process')
    t.match(list.flaky, { state: 'running' })
    t.equal(await sh(c, 'curl -s http://127.0.0.1:8000/index.html'), 'hello\n')
  })

  await t.test('after a sandbox stop they are listed as stopped and start again with their command', async t => {
    const { c, sandbox } = await server(t)
    await sandbox.stop(chat)
    const list = await jobs(c)
    t.match(list.web, { state: 'stopped', pid: null, ports: [], reason: 'the sandbox restarted' })
    t.match(list.flaky, { state: 'stopped', reason: 'the sandbox restarted' })
    t.match(list.ticker, { state: 'stopped' })
    t.match(await sh(c, 'job list'), /web: stopped: the sandbox restarted; job start web starts it again/)
    t.match(await sh(c, 'curl -s -o /dev/null http://127.0.0.1:8000/; echo rc=$?'), /rc=7/, 'nothing listens before the restart')

    t.match(await sh(c, 'job start web --wait-port 8000'), /^job web started \(pid \d+\): python3 -m http\.server 8000 --bind 127\.0\.0\.1\njob web listens on port 8000\n/)
    t.equal(await sh(c, 'curl -s http://127.0.0.1:8000/index.html'), 'hello\n', 'same command, same directory')
    t.match(await sh(c, 'job restart flaky; echo rc=$?'), /^job flaky started[\s\S]*rc=0/, 'job restart starts a stopped job too')
    t.match(await sh(c, 'job logs web --since 0 2>/dev/null | grep -c "started pid"'), /^2\n/, 'one log across both runs')
  })

  await t.test('an idle pause keeps the jobs: the next call wakes the sandbox with the same processes', async t => {
    const { c, sandbox } = await server(t, { CONTAINER_IDLE_TIMEOUT: '1' })
    const before = (await jobs(c)).web
    t.match(before, { state: 'running', ports: [{ port: 8000 }] })
    const id = (await sandbox.status(chat)).sandboxId ?? ''
    const engine = testDockerClient()
    t.teardown(() => { engine.close() })
    await until('the idle sandbox paused', async () => {
      await sandbox.reap()
      return (await engine.inspect(id))?.paused === true
    }, 20_000)
    t.match(await sandbox.status(chat), { state: 'running', paused: true })
    t.match((await jobs(c)).web, { state: 'running', pid: before?.pid, ports: [{ port: 8000 }] }, 'the call woke it: same job, same pid')
    t.equal(await sh(c, 'curl -s http://127.0.0.1:8000/index.html'), 'hello\n')
    t.match(await engine.inspect(id), { running: true, paused: false })
  })
})
