/*
 * A sandbox killed while a call's docker exec is set up, without the in-sandbox agent (SANDBOX_AGENT off: every
 * call is a docker exec). Docker may accept the exec's start while the container's task is already dead and
 * refuse to run the process ("OCI runtime exec failed: … cannot exec in a stopped container", pid 0): nothing
 * of the call ran, so it runs once more in the sandbox started again and says so, as the agent path does for a
 * request lost before SPAWNED (docs/engine.md#the-agent-socket). Before, such a call was reported as stopped
 * while it ran. The kill races the exec on purpose: each round counts whether Docker refused the start (the
 * case here) or refused the exec earlier (create or start answering "not running", recovered before too).
 */
import Docker from 'dockerode'
import t from 'tap'
import { parseDockerHost } from '../../plugins/sandbox-docker/docker-endpoint.js'
import type { ExecSpec } from '../../plugins/sandbox/engine-types.js'
import { buildSandboxApp, cleanupPrefix, DOCKER_HOST, dockerOrSkip, wrapClient } from './docker.js'

const PREFIX = 'trplain'
const ROUNDS = 48
/** Rounds that met the refused start, enough to stop early. */
const ENOUGH = 4
const { skip } = await dockerOrSkip()
const sleep = async (ms: number): Promise<void> => await new Promise(resolve => setTimeout(resolve, ms))

t.test('without the agent, a call whose exec Docker refused because the sandbox was just killed runs again in the sandbox started again', { skip }, async t => {
  await cleanupPrefix(t, PREFIX)
  const docker = new Docker(parseDockerHost(DOCKER_HOST).docker)
  let race: { delayMs: number } | undefined
  let refused = 0
  let started = 0
  /** What the round's exec met: refused before it ran ('early': create/start said not running), refused at its start, or it ran. */
  let outcome: 'early' | 'refused' | 'ran' = 'early'
  const client = wrapClient(real => ({
    exec: async (id: string, spec: ExecSpec) => {
      const r = race
      if (r === undefined || !spec.argv.join(' ').includes('RACE')) return await real.exec(id, spec)
      race = undefined
      // The kill is on its way (Docker answers it once the container ended); the exec is set up meanwhile.
      void docker.getContainer(id).kill().catch(() => {})
      await sleep(r.delayMs)
      const p = await real.exec(id, spec)
      void p.exit.then(e => {
        if (e.notRunning === true) { refused++; outcome = 'refused' } else if (!e.notStarted) outcome = 'ran'
      })
      return p
    }
  }))
  const { app } = await buildSandboxApp(t, PREFIX, { client, agent: false })
  const sandbox = app.sandbox
  const chat = 'plain-1'
  await sandbox.ensure(chat)
  t.equal((await sandbox.exec(chat, ['sh', '-c', 'echo kept > /home/assistant/keep.txt'])).exitCode, 0)

  /**
   * On a loaded machine the exec may win the race: its process runs before the kill lands. That round is
   * a kill of a running command, not what this file is about: it is counted, not judged.
   */
  const ranFirst = (round: number): boolean => {
    if (outcome !== 'ran') return false
    started++
    t.comment(`round ${round}: the process ran before the kill landed`)
    return true
  }
  let rounds = 0
  for (; rounds < ROUNDS && refused < ENOUGH; rounds++) {
    race = { delayMs: rounds % 5 }
    outcome = 'early'
    let out = ''
    const viaCommand = rounds % 2 === 0
    if (viaCommand) {
      const r = await sandbox.runCommand(chat, `echo RACE${rounds}; cat ~/keep.txt`, { timeoutMs: 30_000, onOutput: s => { out += s }, onReset: () => { out = '' } })
      if (ranFirst(rounds)) continue
      t.same({ out, exitCode: r.exitCode, notices: r.notices }, {
        out: `RACE${rounds}\nkept\n`,
        exitCode: 0,
        notices: [{ kind: 'sandbox-stopped', action: 'restarted', removed: false, by: 'outside' }]
      }, `round ${rounds} (bash_tool's command): ran once, in the sandbox started again, and said so`)
    } else {
      const r = await sandbox.exec(chat, ['sh', '-c', `echo RACE${rounds}; cat /home/assistant/keep.txt`])
      const notices = sandbox.takeNotices?.(chat)
      if (ranFirst(rounds)) continue
      t.same({ out: r.stdout.toString(), exitCode: r.exitCode, notices }, {
        out: `RACE${rounds}\nkept\n`,
        exitCode: 0,
        notices: [{ kind: 'sandbox-stopped', action: 'restarted', removed: false, by: 'outside' }]
      }, `round ${rounds} (exec): ran once, in the sandbox started again, and said so`)
    }
  }
  t.comment(`${refused} of ${rounds} rounds met a start Docker refused, ${started} ran before the kill (the rest: the exec refused before it)`)
  t.ok(refused > 0, 'the race met the refused start at least once (else this file tested nothing new)')
})
