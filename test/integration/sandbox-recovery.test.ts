/*
 * A sandbox changed behind the server's back, on real Docker through the MCP SDK client
 * over HTTP: removed (docker rm -f), stopped (docker stop), killed (docker kill), before or during a
 * call. The first call after it recovers (same volume, same data) and says what happened.
 */
import t from 'tap'
import { chatKey } from '../../core/chat-id.js'
import type { CoreSandboxService } from '../../plugins/sandbox/service.js'
import { bash, client, textOf, toolsApp } from '../plugins/workspace-tools/integration-app.js'
import { containersOfChat, dockerOrSkip, testDockerClient } from './docker.js'

const gate = await dockerOrSkip()
const sleep = async (ms: number): Promise<void> => await new Promise(resolve => setTimeout(resolve, ms))

t.test('a sandbox changed behind the server\'s back: the first call recovers it', gate, async t => {
  const { app, url, prefix } = await toolsApp(t)
  const docker = testDockerClient()
  t.teardown(() => docker.close())
  const chat = 'rec-1'
  const key = chatKey(chat)
  const c = await client(t, url, chat)
  const only = async (): Promise<{ id: string, running: boolean }> => {
    const list = await containersOfChat(prefix, key)
    t.equal(list.length, 1, 'exactly one container for the chat')
    return list[0] ?? { id: '', running: false }
  }
  t.equal(textOf(await bash(c, 'echo kept > ~/keep.txt && echo out > /mnt/user-data/outputs/o.txt && echo ok')).split('\n')[0], 'ok')

  t.test('killed while the agent holds a call it has not started: the call runs once more in the sandbox started again', async t => {
    // docs/engine.md#the-agent-socket: frozen, the agent neither reads the request nor says SPAWNED; the kill then
    // ends its stream, which is what a loaded host shows when a call meets a killed agent's connection.
    // As assistant (the agent's user; root has no CAP_KILL there), through the engine's exec, not the agent.
    const before = await only()
    const stop = await docker.exec(before.id, { argv: ['pkill', '-STOP', '-f', '/opt/cubicle-agent/cubicle-agent.py'], user: 'assistant', cwd: '/', env: [] })
    t.equal((await stop.exit).code, 0, 'the agent is frozen')
    const pending = bash(c, 'cat ~/keep.txt')
    await sleep(1000)
    await docker.kill(before.id)
    const r = await pending
    t.notOk(r.isError, `the call succeeds (an image whose agent predates SPAWNED fails here: rebuild it): ${textOf(r).slice(0, 300)}`)
    t.match(textOf(r), /^kept\n\n\n\[Note: The sandbox had been stopped outside this server .*it was started again for this command\./, 'and says the sandbox was started again')
    t.equal((await only()).id, before.id, 'the same container')
  })

  t.test('docker rm -f between calls: recreated on the same workspace, and said so once', async t => {
    const before = await only()
    await docker.remove(before.id)
    const r = await bash(c, 'cat ~/keep.txt /mnt/user-data/outputs/o.txt')
    t.notOk(r.isError, 'the first call succeeds')
    t.match(textOf(r), /^kept\nout\n\n\n\[Note: The sandbox had been removed outside this server .*a new one was created for this command on the same workspace\. Files in \/home\/assistant and \/mnt\/user-data\/outputs are kept; files elsewhere \(such as installed packages\) and all processes are gone\.\]$/)
    const after = await only()
    t.not(after.id, before.id)
    t.ok(after.running)
    t.equal(textOf(await bash(c, 'echo again')), 'again\n', 'reported once')
  })

  t.test('docker stop and docker kill between calls: started again, same container', async t => {
    for (const how of ['stop', 'kill'] as const) {
      const before = await only()
      await bash(c, 'nohup sleep 500 >/dev/null 2>&1 &')
      if (how === 'stop') await docker.stop(before.id, 0)
      else {
        // Docker's kill returns once the signal is sent; "between calls" means after the container ended (a
        // call that starts while it is dying is the case of the next subtest: killed while a command runs).
        await docker.kill(before.id)
        for (const until = Date.now() + 10_000; (await docker.inspect(before.id))?.running === true && Date.now() < until;) await new Promise(resolve => setTimeout(resolve, 50))
      }
      // On a loaded Docker host the call can still be handed to the killed agent's connection before the server
      // has seen it close: the agent had not said SPAWNED, so the call runs once more in the sandbox started
      // again (docs/engine.md#the-agent-socket), and the result is the same.
      const r = await bash(c, 'cat ~/keep.txt; pgrep -cf "^sleep 500" || true')
      t.notOk(r.isError, `${how}: the first call succeeds`)
      t.match(textOf(r), /^kept\n0\n\n\n\[Note: The sandbox had been stopped outside this server .*it was started again for this command\. Files in \/home\/assistant and \/mnt\/user-data\/outputs are kept; processes that were running, background jobs included, are gone\.\]$/, how)
      t.equal((await only()).id, before.id, `${how}: the same container was started again`)
    }
  })

  t.test('killed while a command runs: the result says so, the next call starts it again', async t => {
    const pending = bash(c, 'echo started; sleep 60; echo never')
    await sleep(1500)
    await docker.kill((await only()).id)
    const r = await pending
    t.equal(r.isError, true)
    t.match(textOf(r), /^Error: the sandbox was stopped while the command was running\. The exit status of the command is unknown\. The sandbox was stopped outside this server .*The next command starts it again\. Files in \/home\/assistant and \/mnt\/user-data\/outputs are kept\.\n\nOutput before that \(last 1000 characters at most\):\nstarted\n$/)
    t.equal(textOf(await bash(c, 'cat ~/keep.txt')), 'kept\n')
  })

  t.test('the driver API recovers too: exec after docker rm, putFile after docker stop', async t => {
    const sandbox = app.sandbox as CoreSandboxService
    await docker.remove((await only()).id)
    const r = await sandbox.exec(chat, ['cat', '/home/assistant/keep.txt'])
    t.equal(r.stdout.toString(), 'kept\n')
    await docker.stop((await only()).id, 0)
    await sandbox.putFile(chat, '/home/assistant/put.txt', 'put\n', { uid: 1000, gid: 1000 })
    t.equal((await sandbox.exec(chat, ['cat', '/home/assistant/put.txt'])).stdout.toString(), 'put\n')
    t.match(sandbox.takeNotices(chat), [
      { kind: 'sandbox-stopped', action: 'recreated', removed: true, by: 'outside' },
      { kind: 'sandbox-stopped', action: 'restarted', removed: false, by: 'outside' }
    ], 'the events wait for the next result (or takeNotices)')
    t.same(sandbox.takeNotices(chat), [])
  })

  t.test('a sandbox stopped on purpose is not started behind the caller\'s back', async t => {
    const sandbox = app.sandbox as CoreSandboxService
    await sandbox.stop(chat)
    await t.rejects(sandbox.exec(chat, ['true']), { code: 'SANDBOX_NOT_RUNNING' })
    t.equal((await only()).running, false)
  })
})
