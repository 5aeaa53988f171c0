/*
 * Server-driven lifecycle against a real engine (docs/contract.md#isolation, docs/contract.md#idle-stop-max-age-and-purge): idle stop, leases,
 * max-age removal keeping the volume, the data purge and the running-sandbox cap. The clock is
 * injected, so passes run instantly; one test lets the real timer fire.
 */
import t from 'tap'
import { readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { chatKey } from '../../core/chat-id.js'
import type { StopReason } from '../../plugins/sandbox/types.js'
import { buildSandboxApp, cleanupPrefix, containersOfChat, dockerOrSkip, testDockerClient, volumesOfChat } from './docker.js'

const PREFIX = 'treap'
const { skip } = await dockerOrSkip()

t.test('sandbox reaper (real Docker)', { skip }, async t => {
  await cleanupPrefix(t, PREFIX)
  let offset = 0
  const now = (): number => Date.now() + offset
  const minutes = (m: number): void => { offset += m * 60_000 }

  t.test('idle stop after CONTAINER_IDLE_TIMEOUT (CONTAINER_PAUSED_TIMEOUT 0); a lease holds it; activity resets it', async t => {
    offset = 0
    const { app, service } = await buildSandboxApp(t, PREFIX, { idleTimeoutS: 600, pausedTimeoutS: 0, now, reaperIntervalMs: 3_600_000 })
    const stops: Array<[string, StopReason]> = []
    app.sandbox.onStop?.((chat, reason) => stops.push([chat, reason]))
    await app.sandbox.ensure('reap-idle')
    await app.sandbox.ensure('reap-leased')
    const release = app.sandbox.lease('reap-leased')
    const socketRelease = app.sandbox.lease('reap-leased', { kind: 'socket' })

    minutes(5)
    await service.reap()
    t.equal((await app.sandbox.status('reap-idle')).state, 'running', 'not idle yet')
    app.sandbox.touch('reap-idle') // activity at +5 min
    minutes(6)
    await service.reap()
    t.equal((await app.sandbox.status('reap-idle')).state, 'running', 'touch() reset the idle timer')
    minutes(5)
    await service.reap()
    t.equal((await app.sandbox.status('reap-idle')).state, 'stopped', 'stopped after 10 idle minutes')
    t.equal((await app.sandbox.status('reap-leased')).state, 'running', 'the leased sandbox stays up')
    t.same(stops, [['reap-idle', 'idle']])

    release()
    release() // idempotent
    minutes(11)
    await service.reap()
    t.equal((await app.sandbox.status('reap-leased')).state, 'running', 'a socket lease still holds it')
    socketRelease()
    minutes(11)
    await service.reap()
    t.equal((await app.sandbox.status('reap-leased')).state, 'stopped')

    // A status poll is not activity; the next ensure restarts the stopped sandbox.
    const info = await app.sandbox.ensure('reap-idle')
    t.equal((await app.sandbox.status('reap-idle')).state, 'running')
    t.equal((await containersOfChat(PREFIX, info.chatKey)).length, 1)
  })

  t.test('a running command holds its sandbox (runCommand leases internally)', async t => {
    offset = 0
    const { app, service } = await buildSandboxApp(t, PREFIX, { idleTimeoutS: 1, now, reaperIntervalMs: 3_600_000 })
    await app.sandbox.ensure('reap-busy')
    // The clock moves only once the command runs (a fixed pause lost that race on a loaded machine).
    let started: () => void = () => {}
    const running = new Promise<void>(resolve => { started = resolve })
    const p = app.sandbox.runCommand('reap-busy', 'echo started; sleep 2; echo done', { timeoutMs: 10_000, onOutput: text => { if (text.includes('started')) started() } })
    await running
    minutes(60)
    await service.reap()
    const r = await p
    t.equal(r.exitCode, 0, 'the command was not cut off')
  })

  t.test('the reaper timer runs by itself', async t => {
    const { app } = await buildSandboxApp(t, PREFIX, { idleTimeoutS: 1, pausedTimeoutS: 0, reaperIntervalMs: 200 })
    await app.sandbox.ensure('reap-timer')
    const deadline = Date.now() + 15_000
    let state = ''
    while (Date.now() < deadline && state !== 'stopped') {
      await new Promise(resolve => setTimeout(resolve, 250))
      state = (await app.sandbox.status('reap-timer')).state
    }
    t.equal(state, 'stopped')
  })

  t.test('max age removes the container (volume and data kept); purge deletes both later', async t => {
    offset = 0
    const { app, service, dataDir } = await buildSandboxApp(t, PREFIX, { maxAgeHours: 24, dataMaxAgeDays: 7, idleTimeoutS: 600, now, reaperIntervalMs: 3_600_000 })
    const stops: Array<[string, StopReason]> = []
    app.sandbox.onStop?.((chat, reason) => stops.push([chat, reason]))
    const chat = 'reap-old'
    const key = chatKey(chat)
    await app.sandbox.ensure(chat)
    await app.sandbox.exec(chat, ['sh', '-c', 'echo keep > ~/k'])
    const socket = app.sandbox.lease(chat, { kind: 'socket' })
    const call = app.sandbox.lease(chat)
    minutes(25 * 60)
    await service.reap()
    t.equal((await app.sandbox.status(chat)).state, 'running', 'a tool-call lease defers the max-age removal')
    call()
    await service.reap()
    socket()
    t.equal((await app.sandbox.status(chat)).state, 'absent', 'removed at max age despite an open socket lease')
    t.same(stops.filter(([c]) => c === chat), [[chat, 'max-age']], 'socket holders are told')
    t.same(await volumesOfChat(PREFIX, key), [`${PREFIX}-home-${key}`], 'volume kept')
    await stat(join(dataDir, 'chats', key, 'meta.json'))

    t.equal(await service.purge(), 0, 'recently active: nothing purged')
    minutes(8 * 24 * 60)
    // A chat that still has a container is never purged, whatever its age.
    await app.sandbox.ensure('reap-has-container')
    minutes(8 * 24 * 60)
    await app.sandbox.stop('reap-has-container')
    t.equal(await service.purge(), 1)
    t.same(await volumesOfChat(PREFIX, key), [], 'volume purged')
    await t.rejects(stat(join(dataDir, 'chats', key)), { code: 'ENOENT' }, 'data dir purged')
    t.equal((await containersOfChat(PREFIX, chatKey('reap-has-container'))).length, 1)
    t.ok(JSON.parse(await readFile(join(dataDir, 'chats', chatKey('reap-has-container'), 'meta.json'), 'utf8')), 'kept')

    // The chat starts over from scratch on its next call.
    await app.sandbox.ensure(chat)
    t.equal((await app.sandbox.exec(chat, ['sh', '-c', 'cat ~/k 2>/dev/null || echo gone'])).stdout.toString(), 'gone\n')
  })

  t.test('idle: paused (processes and memory kept), woken by the next access, stopped CONTAINER_PAUSED_TIMEOUT later', async t => {
    offset = 0
    const { app, service } = await buildSandboxApp(t, PREFIX, { idleTimeoutS: 600, pausedTimeoutS: 3600, now, reaperIntervalMs: 3_600_000 })
    const stops: Array<[string, StopReason]> = []
    app.sandbox.onStop?.((chat, reason) => stops.push([chat, reason]))
    const ensured: boolean[] = []
    app.sandbox.onEnsure(async (_box, event) => { ensured.push(event.started) })
    const chat = 'reap-pause'
    const info = await app.sandbox.ensure(chat)
    // A process in its own session (as a background job runs): its pid must survive the pause.
    const pid = (await app.sandbox.exec(chat, ['sh', '-c', 'setsid sleep 900 >/dev/null 2>&1 < /dev/null & echo $!'])).stdout.toString().trim()
    const docker = testDockerClient()
    t.teardown(() => { docker.close() })

    minutes(11)
    await service.reap()
    t.same(await app.sandbox.status(chat), { state: 'running', paused: true, metaExists: true, sandboxId: info.sandboxId }, 'paused, reported as running')
    t.match(await docker.inspect(info.sandboxId), { running: false, paused: true }, 'the engine froze it')
    t.same(stops, [[chat, 'paused']])
    // /ready counts paused sandboxes (other tests' sandboxes of the prefix may be re-adopted: at least this one).
    const ready = (await app.inject('/ready')).json<Record<string, string>>()
    t.ok(Number(ready.paused) >= 1, `/ready says paused: ${ready.paused}`)
    minutes(30)
    await app.sandbox.status(chat)
    await service.reap()
    t.match(await docker.inspect(info.sandboxId), { paused: true }, 'a status poll is no access: still paused')

    const t0 = performance.now()
    const r = await app.sandbox.exec(chat, ['sh', '-c', `kill -0 ${pid} && echo alive`])
    const wakeMs = performance.now() - t0
    t.equal(r.stdout.toString(), 'alive\n', `an exec wakes it and the process is the same (${wakeMs.toFixed(0)} ms)`)
    t.match(await docker.inspect(info.sandboxId), { running: true, paused: false })
    t.equal((await app.sandbox.ensure(chat)).sandboxId, info.sandboxId, 'the same sandbox, not a new start')
    t.notOk(ensured.slice(1).some(started => started), 'waking is no start')

    // Paused again: a relay stream (what the terminal, the browser view and app URLs open) wakes it too.
    minutes(11)
    await service.reap()
    t.equal((await docker.inspect(info.sandboxId))?.paused, true)
    const stream = await app.sandbox.openStream?.(chat, ['sh', '-c', `kill -0 ${pid} && echo relayed`])
    const relayed = await new Promise<string>(resolve => {
      let out = ''
      stream?.demux(b => { out += b.toString() })
      stream?.socket.on('close', () => { resolve(out) })
      stream?.socket.end()
    })
    t.equal(relayed, 'relayed\n', 'openStream woke it, same process')
    stream?.close()

    // Paused again; after CONTAINER_PAUSED_TIMEOUT it is stopped for good (reason idle).
    minutes(11)
    await service.reap()
    t.equal((await docker.inspect(info.sandboxId))?.paused, true)
    minutes(59)
    await service.reap()
    t.equal((await docker.inspect(info.sandboxId))?.paused, true, 'not yet: 59 of 60 paused minutes')
    minutes(2)
    await service.reap()
    t.match(await docker.inspect(info.sandboxId), { running: false, paused: false }, 'stopped after CONTAINER_PAUSED_TIMEOUT')
    t.same(stops.map(([, reason]) => reason), ['paused', 'paused', 'paused', 'idle'])
    t.equal((await app.sandbox.status(chat)).state, 'stopped')
  })

  t.test('memory pressure stops paused sandboxes early, the longest paused first', async t => {
    offset = 0
    let short = 0
    const memoryAvailable = (): number => short-- > 0 ? 0.05 : 0.5
    // A prefix of its own: sandboxes of the other tests, re-adopted here, would be paused (and stopped) too.
    await cleanupPrefix(t, `${PREFIX}mem`)
    const { app, service } = await buildSandboxApp(t, `${PREFIX}mem`, { idleTimeoutS: 600, pausedTimeoutS: 3600, now, reaperIntervalMs: 3_600_000, memoryAvailable })
    const stops: Array<[string, StopReason]> = []
    app.sandbox.onStop?.((chat, reason) => stops.push([chat, reason]))
    await app.sandbox.ensure('reap-mem-old')
    minutes(11)
    await service.reap()
    await app.sandbox.ensure('reap-mem-new')
    minutes(11)
    await service.reap()
    t.match(await app.sandbox.status('reap-mem-old'), { paused: true })
    t.match(await app.sandbox.status('reap-mem-new'), { paused: true })
    minutes(1)
    short = 1
    await service.reap()
    t.equal((await app.sandbox.status('reap-mem-old')).state, 'stopped', 'the longest paused one was stopped')
    t.match(await app.sandbox.status('reap-mem-new'), { state: 'running', paused: true }, 'memory available again: the other stays paused')
    t.same(stops, [['reap-mem-old', 'paused'], ['reap-mem-new', 'paused'], ['reap-mem-old', 'memory']])
  })

  t.test('a paused sandbox is re-adopted as paused and woken by ensure()', async t => {
    offset = 0
    const one = await buildSandboxApp(t, PREFIX, { idleTimeoutS: 600, now, reaperIntervalMs: 3_600_000 })
    const chat = 'reap-pause-adopt'
    const info = await one.app.sandbox.ensure(chat)
    const pid = (await one.app.sandbox.exec(chat, ['sh', '-c', 'setsid sleep 901 >/dev/null 2>&1 < /dev/null & echo $!'])).stdout.toString().trim()
    minutes(11)
    await one.service.reap()
    await one.app.close()
    const two = await buildSandboxApp(t, PREFIX, { idleTimeoutS: 600, now, reaperIntervalMs: 3_600_000 }, one.dataDir)
    t.match(await two.app.sandbox.status(chat), { state: 'running', paused: true })
    t.ok(Number((await two.app.inject('/ready')).json<Record<string, string>>().paused) >= 1, 're-adopted paused: counted by /ready')
    t.equal((await two.app.sandbox.ensure(chat)).sandboxId, info.sandboxId)
    t.equal((await two.app.sandbox.exec(chat, ['sh', '-c', `kill -0 ${pid} && echo alive`])).stdout.toString(), 'alive\n')
  })

  t.test('MAX_RUNNING_SANDBOXES counts paused sandboxes and stops them first', async t => {
    offset = 0
    const { app, service } = await buildSandboxApp(t, PREFIX, { maxRunning: 2, idleTimeoutS: 600, now, reaperIntervalMs: 3_600_000 })
    await app.sandbox.ensure('capp-1')
    minutes(11)
    await app.sandbox.ensure('capp-2')
    await service.reap()
    t.match(await app.sandbox.status('capp-1'), { paused: true })
    minutes(1)
    await app.sandbox.ensure('capp-3')
    t.equal((await app.sandbox.status('capp-1')).state, 'stopped', 'the paused one made room, not the idle running one')
    t.equal((await app.sandbox.status('capp-2')).state, 'running')
  })

  t.test('MAX_RUNNING_SANDBOXES stops the least recently active idle sandbox, else fails', async t => {
    offset = 0
    const { app } = await buildSandboxApp(t, PREFIX, { maxRunning: 2, now, reaperIntervalMs: 3_600_000 })
    await app.sandbox.ensure('cap-1')
    minutes(1)
    await app.sandbox.ensure('cap-2')
    minutes(1)
    await app.sandbox.ensure('cap-3')
    t.equal((await app.sandbox.status('cap-1')).state, 'stopped', 'least recently active was stopped')
    t.equal((await app.sandbox.status('cap-2')).state, 'running')
    t.equal((await app.sandbox.status('cap-3')).state, 'running')
    const r2 = app.sandbox.lease('cap-2')
    const r3 = app.sandbox.lease('cap-3')
    const err = await app.sandbox.ensure('cap-1').then(() => undefined, (e: unknown) => e as Error & { code: string })
    t.equal(err?.code, 'SANDBOX_CAPACITY')
    t.equal(err?.message, 'sandbox capacity reached')
    r2()
    await app.sandbox.ensure('cap-1')
    t.equal((await app.sandbox.status('cap-2')).state, 'stopped')
    r3()
  })
})
