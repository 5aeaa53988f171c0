/*
 * sandbox-docker against a real engine: creation, naming, labels, data dirs, single flight,
 * 409 adoption, persistence, re-adoption after a restart, recreation on a failed start, create
 * timeout, missing image and Docker outages (docs/contract.md#sandbox-configuration, docs/contract.md#lifecycle, docs/contract.md#creation, docs/contract.md#idle-stop-max-age-and-purge, docs/contract.md#other-endpoints-and-startup).
 */
import t from 'tap'
import { mkdir, mkdtemp, readFile, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chatKey } from '../../core/chat-id.js'
import { DockerError } from '../../plugins/sandbox-docker/docker-client.js'
import { buildSandboxSpec } from '../../plugins/sandbox/sandbox-spec.js'
import { labelTime } from '../../plugins/sandbox/names.js'
import {
  buildSandboxApp, cleanupPrefix, containersOfChat, dockerOrSkip, testDockerClient, TEST_IMAGE, volumesOfChat, wrapClient
} from './docker.js'

const PREFIX = 'tlife'
const { skip } = await dockerOrSkip()

t.test('sandbox lifecycle (real Docker)', { skip }, async t => {
  await cleanupPrefix(t, PREFIX)
  // Sandboxes this client creates outside the service find their data areas below `scratch`.
  const scratch = await mkdtemp(join(tmpdir(), `${PREFIX}-data-`))
  const client = testDockerClient({ data: scratch, skills: '' })
  t.teardown(() => client.close())
  const areas = async (chat: string): Promise<void> => {
    for (const area of ['uploads', 'outputs']) await mkdir(join(scratch, 'chats', chatKey(chat), area), { recursive: true })
  }

  t.test('cold and warm ensure; labels, names, data dirs, meta.json, /ready', async t => {
    const { app, dataDir } = await buildSandboxApp(t, PREFIX)
    const chat = 'life-basic'
    const key = chatKey(chat)
    const user = { email: 'ann@example.com', emailRejected: false, name: 'Ann', mcpServers: ['github'], credentials: { gitlabToken: 'secret-token' } }
    let t0 = performance.now()
    const info = await app.sandbox.ensure(chat, { user })
    const cold = performance.now() - t0
    t0 = performance.now()
    const again = await app.sandbox.ensure(chat)
    const warm = performance.now() - t0
    t.comment(`ensure cold ${cold.toFixed(0)} ms, warm ${warm.toFixed(2)} ms`)
    t.ok(warm < 20, 'warm ensure needs no Docker round trip')
    t.same(again, info)
    t.equal(info.chatKey, key)
    t.equal(info.name, `${PREFIX}-sbx-${key}`)
    t.match(info.createdAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/)

    const c = await client.inspect(info.name)
    t.ok(c?.running)
    const ours = Object.fromEntries(Object.entries(c?.labels ?? {}).filter(([k]) => !k.startsWith('org.opencontainers.') && !k.startsWith('cubicle.')))
    // Docker cannot label a sandbox claimed from the warm pool, so no sandbox names its chat in labels:
    // the name and the chat's record do (a created and a claimed sandbox look the same).
    t.same(ours, {
      'managed-by': 'computer-use-server',
      tool: 'computer-use-mcp',
      'cu.prefix': PREFIX,
      'cu.created-at': labelTime(new Date(info.createdAt)),
      'cu.image': TEST_IMAGE.replace(/[^-A-Za-z0-9_.]/g, '_')
    })
    for (const [k, v] of Object.entries(ours)) t.match(v, /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/, `${k}: a valid Kubernetes label value`)
    t.same(JSON.parse(await readFile(join(dataDir, 'chats', key, 'sandbox.json'), 'utf8')), { chat_id: chat, home_volume: `${PREFIX}-home-${key}` }, 'the record names the chat')
    const vols = await client.listVolumes([`cu.prefix=${PREFIX}`])
    t.same(vols.map(v => v.name), [`${PREFIX}-home-${key}`])
    t.same(vols[0]?.labels, { 'managed-by': 'computer-use-server', tool: 'computer-use-mcp', 'cu.prefix': PREFIX })

    const host = await app.sandbox.exec(chat, ['hostname'])
    t.equal(host.stdout.toString().trim(), 'sandbox', 'one hostname for every sandbox')
    const env = (await app.sandbox.exec(chat, ['env'])).stdout.toString()
    t.match(env, /^CHAT_ID=life-basic$/m)
    // Plugin variables come from their contributors (docs/engine.md#environment): neither sub-agent nor egress is loaded here.
    t.notMatch(env, /^(SUBAGENT_CLI|HTTP_PROXY)=/m)
    t.match(env, /^GIT_AUTHOR_NAME=Ann$/m)
    t.match(env, /^GIT_COMMITTER_EMAIL=ann@example\.com$/m)
    t.match(env, /^GITLAB_HOST=gitlab\.com$/m)

    const chatDir = join(dataDir, 'chats', key)
    const up = await stat(join(chatDir, 'uploads'))
    const out = await stat(join(chatDir, 'outputs'))
    t.equal(up.mode & 0o777, 0o755, 'uploads 0755')
    t.equal(up.uid, process.getuid?.())
    t.equal(out.mode & 0o777, 0o750, 'outputs 0750')
    t.equal(out.uid, 1000, 'outputs owned by the sandbox uid')
    t.equal(out.gid, 1000)
    const mounts = (await app.sandbox.exec(chat, ['sh', '-c', 'touch /mnt/user-data/outputs/ok && echo w; touch /mnt/user-data/uploads/x 2>&1; touch /mnt/skills/x 2>&1; true'])).stdout.toString()
    t.match(mounts, /^w$/m, 'outputs writable by assistant')
    t.match(mounts, /uploads\/x.*Read-only file system/, 'uploads read-only')
    t.match(mounts, /skills\/x.*Permission denied/, 'skills not writable')
    const ws = (await app.sandbox.exec(chat, ['sh', '-c', 'stat -c %a /mnt/user-data/outputs'])).stdout.toString().trim()
    t.equal(ws, '750', 'nothing world-writable')

    const meta = JSON.parse(await readFile(join(chatDir, 'meta.json'), 'utf8')) as Record<string, unknown>
    t.same(Object.keys(meta).sort(), ['chat_id', 'created_at', 'image', 'last_active_at', 'mcp_servers', 'user_email', 'user_name'])
    t.match(meta, { chat_id: chat, user_email: 'ann@example.com', user_name: 'Ann', mcp_servers: ['github'], image: TEST_IMAGE })
    t.notMatch(JSON.stringify(meta), /secret-token/, 'no secret in meta.json')

    const ready = await app.inject('/ready')
    t.equal(ready.statusCode, 200)
    t.same(ready.json(), { status: 'ready', engine: 'ok', docker: 'ok', image: 'present', data_dir: 'writable', paused: '0' })

    const status = await app.sandbox.status(chat)
    t.same(status, { state: 'running', metaExists: true, sandboxId: info.sandboxId })
    t.same(await app.sandbox.status('life-never-used'), { state: 'absent', metaExists: false })
    t.same(await containersOfChat(PREFIX, chatKey('life-never-used')), [], 'status never creates')
  })

  t.test('onEnsure hooks run in order after every ensure, may use the sandbox, and never fail it', async t => {
    const { app } = await buildSandboxApp(t, PREFIX)
    const calls: string[] = []
    app.sandbox.onEnsure(async (info, event) => {
      calls.push(`first:${String(event.started)}:${event.user?.email ?? '-'}`)
      await app.sandbox.putFile(info.chatId, '/home/assistant/README.md', `chat ${info.chatId}\n`)
    })
    app.sandbox.onEnsure(async () => { calls.push('second'); throw new Error('hook failure is only logged') })
    let nested = false
    app.sandbox.onEnsure(async (info) => {
      // A hook may call ensure() itself (once: it runs the hooks again) without deadlocking.
      if (!nested) { nested = true; await app.sandbox.ensure(info.chatId) }
      calls.push('third')
    })
    const user = { email: 'h@example.com', emailRejected: false, mcpServers: [], credentials: {} }
    await app.sandbox.ensure('life-hooks', { user })
    t.same(calls, ['first:true:h@example.com', 'second', 'first:false:-', 'second', 'third', 'third'], 'in order; started on the creating call')
    calls.length = 0
    await app.sandbox.ensure('life-hooks')
    t.same(calls, ['first:false:-', 'second', 'third'])
    t.equal((await app.sandbox.exec('life-hooks', ['cat', 'README.md'])).stdout.toString(), 'chat life-hooks\n')
  })

  t.test('onStart hooks write files while a sandbox starts (before it is ready and before onEnsure), on every start only; a failing one is only logged', async t => {
    const { app, service } = await buildSandboxApp(t, PREFIX)
    const chat = 'life-start-hooks'
    const calls: string[] = []
    service.onStart(async (box, event, files) => {
      // Still starting: the ready wait runs at the same time, so the chat is not known to run yet.
      calls.push(`start:${String(service.knownRunning(box.chatId))}:${event.user?.email ?? '-'}`)
      await files.put('/home/assistant/README.md', `chat ${box.chatId}\n`, { mode: 0o644, uid: 0, gid: 0 })
    })
    service.onStart(async () => { calls.push('failing'); throw new Error('a start hook failure is only logged') })
    service.onStart(async (_box, _event, files) => { await t.rejects(files.put('relative/path', 'x'), TypeError) })
    app.sandbox.onEnsure(async (_box, event) => { calls.push(`ensure:${String(event.started)}`) })
    const user = { email: 's@example.com', emailRejected: false, mcpServers: [], credentials: {} }
    await app.sandbox.ensure(chat, { user })
    t.same(calls, ['start:false:s@example.com', 'failing', 'ensure:true'], 'start hooks during the start, then onEnsure')
    const r = await app.sandbox.exec(chat, ['sh', '-c', 'stat -c "%u:%g %a" README.md; cat README.md'])
    t.equal(r.stdout.toString(), `0:0 644\nchat ${chat}\n`, 'written as root, 0644, before ensure() resolved')
    calls.length = 0
    await app.sandbox.ensure(chat)
    t.same(calls, ['ensure:false'], 'a warm ensure starts nothing: no start hook')
    await app.sandbox.stop(chat)
    calls.length = 0
    await app.sandbox.ensure(chat)
    t.same(calls, ['start:false:-', 'failing', 'ensure:true'], 'a restart runs them again')
  })

  t.test('50 concurrent first calls create exactly one container', async t => {
    const { app } = await buildSandboxApp(t, PREFIX)
    const chat = 'life-herd'
    const infos = await Promise.all(Array.from({ length: 50 }, async () => await app.sandbox.ensure(chat)))
    t.equal(new Set(infos.map(i => i.sandboxId)).size, 1)
    t.equal((await containersOfChat(PREFIX, chatKey(chat))).length, 1)
  })

  t.test('409: a container created behind our back is adopted, never removed', async t => {
    const chat = 'life-adopt'
    const key = chatKey(chat)
    // Someone else creates it while our create is in flight: the service sees 409 and adopts.
    let raced = ''
    const racing = wrapClient(real => ({
      create: async (config) => {
        const other = await real.create(config)
        if (other !== 'conflict') { raced = other.id; await real.start(other.id) }
        return await real.create(config)
      }
    }))
    const { app } = await buildSandboxApp(t, PREFIX, { client: racing })
    const info = await app.sandbox.ensure(chat)
    t.not(raced, '')
    t.equal(info.sandboxId, raced, 'adopted the sibling container')
    t.equal((await containersOfChat(PREFIX, key)).length, 1)

    // A stopped container made entirely outside the service (before any call) is adopted as well.
    const chat2 = 'life-adopt-2'
    const config = buildSandboxSpec({
      image: TEST_IMAGE,
      prefix: PREFIX,
      networkMode: `${PREFIX}-sandboxes`,
      memLimit: 512 * 1024 * 1024,
      cpuLimit: 1,
      pidsLimit: 512,
      sandboxEnv: {},
      envContributors: [],
      diskLimit: 10 * 1024 ** 3
    }, chat2, undefined, new Date())
    await areas(chat2)
    const made = await client.create(config)
    t.not(made, 'conflict')
    await client.start((made as { id: string }).id)
    const info2 = await app.sandbox.ensure(chat2)
    t.equal(info2.sandboxId, (made as { id: string }).id, 'the running container is adopted as is')
  })

  t.test('home persists across stop/start and across container removal', async t => {
    const { app, dataDir } = await buildSandboxApp(t, PREFIX)
    const chat = 'life-persist'
    const first = await app.sandbox.ensure(chat)
    await app.sandbox.exec(chat, ['sh', '-c', 'echo kept > ~/note.txt && echo out > /mnt/user-data/outputs/o.txt'])
    await app.sandbox.stop(chat)
    t.equal((await app.sandbox.status(chat)).state, 'stopped')
    await t.rejects(app.sandbox.exec(chat, ['true']), { code: 'SANDBOX_NOT_RUNNING' })
    const second = await app.sandbox.ensure(chat)
    t.equal(second.sandboxId, first.sandboxId, 'same container restarted')
    t.equal((await app.sandbox.exec(chat, ['cat', '/home/assistant/note.txt'])).stdout.toString(), 'kept\n')

    await app.sandbox.remove(chat)
    t.equal((await app.sandbox.status(chat)).state, 'absent')
    t.equal((await volumesOfChat(PREFIX, chatKey(chat))).length, 1, 'volume kept')
    const third = await app.sandbox.ensure(chat)
    t.not(third.sandboxId, first.sandboxId, 'recreated')
    t.equal((await app.sandbox.exec(chat, ['cat', '/home/assistant/note.txt'])).stdout.toString(), 'kept\n')
    t.equal((await app.sandbox.exec(chat, ['cat', '/mnt/user-data/outputs/o.txt'])).stdout.toString(), 'out\n')

    await app.sandbox.remove(chat, { purge: true })
    t.same(await volumesOfChat(PREFIX, chatKey(chat)), [], 'purge removes the volume')
    await t.rejects(stat(join(dataDir, 'chats', chatKey(chat))), { code: 'ENOENT' }, 'and the data dir')
  })

  t.test('a failed start removes and recreates the container, data kept', async t => {
    let failStart = false
    const flaky = wrapClient(real => ({
      start: async (id) => {
        if (failStart) { failStart = false; throw new DockerError('container start: simulated failure', 500, false) }
        await real.start(id)
      }
    }))
    const { app } = await buildSandboxApp(t, PREFIX, { client: flaky })
    const chat = 'life-flaky'
    const first = await app.sandbox.ensure(chat)
    await app.sandbox.exec(chat, ['sh', '-c', 'echo survived > ~/f'])
    await app.sandbox.stop(chat)
    failStart = true
    const second = await app.sandbox.ensure(chat)
    t.not(second.sandboxId, first.sandboxId, 'recreated')
    t.equal((await app.sandbox.exec(chat, ['cat', '/home/assistant/f'])).stdout.toString(), 'survived\n')
    t.equal((await containersOfChat(PREFIX, chatKey(chat))).length, 1)
  })

  t.test('a restarted server re-adopts its sandboxes without creating new ones', async t => {
    const chat = 'life-restart'
    const key = chatKey(chat)
    const one = await buildSandboxApp(t, PREFIX)
    const info = await one.app.sandbox.ensure(chat)
    await one.app.sandbox.exec(chat, ['sh', '-c', 'nohup sleep 600 >/dev/null 2>&1 &'])
    // A labelled container whose key does not match its chat id: logged and ignored, never deleted.
    const forged = buildSandboxSpec({
      image: TEST_IMAGE,
      prefix: PREFIX,
      networkMode: 'none',
      memLimit: 64 * 1024 * 1024,
      cpuLimit: 1,
      pidsLimit: 64,
      sandboxEnv: {},
      envContributors: [],
      diskLimit: 0
    }, 'life-forged', undefined, new Date())
    // Named like a chat's sandbox, but that chat has no record and the key label disagrees.
    forged.name = `${PREFIX}-sbx-${chatKey('life-forged')}`
    forged.labels['cu.chat-key'] = chatKey('someone-else')
    await areas('life-forged')
    const forgedId = await client.create(forged)
    t.not(forgedId, 'conflict')
    await one.app.close()
    t.ok((await client.inspect(info.sandboxId))?.running, 'closing the server leaves sandboxes running')

    const two = await buildSandboxApp(t, PREFIX, {}, one.dataDir)
    t.same(await two.app.sandbox.status(chat), { state: 'running', metaExists: true, sandboxId: info.sandboxId })
    const t0 = performance.now()
    const again = await two.app.sandbox.ensure(chat)
    t.ok(performance.now() - t0 < 20, 'known running at boot: ensure is immediate')
    t.equal(again.sandboxId, info.sandboxId)
    t.equal((await containersOfChat(PREFIX, key)).length, 1, 'no second container')
    const ps = (await two.app.sandbox.exec(chat, ['pgrep', '-f', 'sleep 600'])).exitCode
    t.equal(ps, 0, 'processes kept running across the restart')
    t.ok(await client.inspect((forgedId as { id: string }).id), 'the forged container was not deleted')
    await client.remove((forgedId as { id: string }).id)
  })

  t.test('a sandbox labelled by an earlier version (raw chat id, RFC 3339 time, no record) is re-adopted from its labels', async t => {
    const chat = 'life-legacy'
    const key = chatKey(chat)
    const dataDir = await mkdtemp(join(tmpdir(), `${PREFIX}-data-`))
    await mkdir(join(dataDir, 'chats', key, 'uploads'), { recursive: true })
    await mkdir(join(dataDir, 'chats', key, 'outputs'), { recursive: true })
    const spec = buildSandboxSpec({
      image: TEST_IMAGE, prefix: PREFIX, networkMode: 'none', memLimit: 512 * 1024 * 1024, cpuLimit: 1, pidsLimit: 512, sandboxEnv: {}, envContributors: [], diskLimit: 0
    }, chat, undefined, new Date())
    const at = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z')
    spec.labels = { ...spec.labels, 'cu.chat-id': chat, 'cu.chat-key': key, 'cu.created-at': at, 'cu.image': TEST_IMAGE }
    const own = testDockerClient({ data: dataDir, skills: '' })
    t.teardown(() => own.close())
    const created = await own.create(spec)
    if (created === 'conflict') throw new Error('name taken')
    await own.start(created.id)
    const { app } = await buildSandboxApp(t, PREFIX, { enableNetwork: false }, dataDir)
    const info = await app.sandbox.ensure(chat)
    t.equal(info.sandboxId, created.id, 'the old sandbox serves the chat')
    t.equal(info.createdAt, at, 'its creation time read from the old label')
    t.equal((await containersOfChat(PREFIX, key)).length, 1, 'no second sandbox')
    await app.sandbox.remove(chat)
  })

  t.test('creation bounded by the create timeout continues in the background', async t => {
    const slow = wrapClient(real => ({
      create: async (config) => {
        await new Promise(resolve => setTimeout(resolve, 1500))
        return await real.create(config)
      }
    }))
    const { app } = await buildSandboxApp(t, PREFIX, { client: slow, createTimeoutS: 1 })
    const chat = 'life-slow'
    const err = await app.sandbox.ensure(chat).then(() => ({ code: 'none', message: '' }), (e: unknown) => e as Error & { code: string })
    t.equal(err.code, 'SANDBOX_CREATE_TIMEOUT')
    t.equal(err.message, 'sandbox creation timed out (1s)')
    const info = await app.sandbox.ensure(chat, { timeoutMs: 30_000 })
    t.equal((await containersOfChat(PREFIX, chatKey(chat))).length, 1, 'the later call awaited the same creation')
    t.equal((await client.inspect(info.sandboxId))?.running, true)
  })

  t.test('a missing image is a coded error naming the build command; /ready says image missing', async t => {
    const { app } = await buildSandboxApp(t, PREFIX, { image: 'computer-use-sandbox:no-such-tag' })
    const err = await app.sandbox.ensure('life-noimage').then(() => ({ code: 'none', message: '' }), (e: unknown) => e as Error & { code: string })
    t.equal(err.code, 'SANDBOX_IMAGE_MISSING')
    t.match(err.message, /npm run sandbox:build/)
    const ready = await app.inject('/ready')
    t.equal(ready.statusCode, 503)
    t.match(ready.json(), { status: 'not_ready', engine: 'ok', docker: 'ok', image: 'missing', data_dir: 'writable' })
  })

  t.test('Docker down: boot succeeds, /ready says unavailable, ensure fails coded, recovery is automatic', async t => {
    const dead = await buildSandboxApp(t, PREFIX, { dockerHost: 'unix:///tmp/cubicle-no-such-docker.sock' })
    const ready = await dead.app.inject('/ready')
    t.equal(ready.statusCode, 503)
    t.match(ready.json(), { status: 'not_ready', engine: 'unavailable', docker: 'unavailable', data_dir: 'writable' })
    await t.rejects(dead.app.sandbox.ensure('life-down'), { code: 'SANDBOX_ENGINE_UNAVAILABLE' })

    let down = true
    const unreachable = (): never => { throw new DockerError('ping: connect ENOENT', undefined, true) }
    const flapping = wrapClient(real => ({
      ping: async (ms) => { if (down) unreachable(); await real.ping(ms) },
      inspect: async (id) => { if (down) unreachable(); return await real.inspect(id) }
    }))
    const { app } = await buildSandboxApp(t, PREFIX, { client: flapping })
    await t.rejects(app.sandbox.ensure('life-down'), { code: 'SANDBOX_ENGINE_UNAVAILABLE' })
    down = false
    const info = await app.sandbox.ensure('life-down')
    t.ok((await client.inspect(info.sandboxId))?.running, 'created once Docker answered again')
  })
})
