/*
 * The warm pool against a real engine (SANDBOX_POOL_SIZE): a claim gives the layout of a fresh sandbox
 * and a claimed sandbox looks like a created one (labels, hostname, volume name), concurrent new chats
 * get one container each (by label or name), the pool refills, a restart re-adopts pooled and claimed
 * sandboxes (the same sandbox and home; an interrupted claim finished or rolled back), stop/start,
 * drift recreation and a removal behind the server's back keep home and outputs, purge removes the
 * claimed volume, and SANDBOX_POOL_SIZE=0 creates as before. No leaks: containers and volumes counted by label.
 */
import t from 'tap'
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { chatKey } from '../../core/chat-id.js'
import type { CoreSandboxService } from '../../plugins/sandbox/service.js'
import type { ExecSpec } from '../../plugins/sandbox/engine-types.js'
import { buildSandboxApp, cleanupPrefix, containersOfChat, dockerOrSkip, testDockerClient, wrapClient } from './docker.js'

const PREFIX = 'tpool'
const { skip } = await dockerOrSkip()

async function until (what: string, cond: () => boolean | Promise<boolean>, ms = 180_000): Promise<void> {
  const end = Date.now() + ms
  while (!await cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 200))
  }
}

const sh = async (s: CoreSandboxService, chat: string, cmd: string): Promise<string> =>
  (await s.exec(chat, ['sh', '-c', cmd])).stdout.toString()

/** What a process inside sees: mount targets and options, owners and modes, the environment (names; CHAT_ID's value). */
const LAYOUT = [
  'awk \'$5 ~ /^\\/(home|mnt|tmp)/ {print $5, $6}\' /proc/self/mountinfo | sort',
  'stat -c "%n %U:%G %a" /home/assistant /mnt/user-data/uploads /mnt/user-data/outputs /mnt/skills',
  'id',
  'env | cut -d= -f1 | grep -v "^HOSTNAME$" | sort | tr "\\n" " "'
].join('; echo; ')

t.test('warm pool (real Docker)', { skip }, async t => {
  const outer = t
  await cleanupPrefix(t, PREFIX)
  const client = testDockerClient()
  t.teardown(() => client.close())
  const poolContainers = async (): Promise<string[]> => (await client.list([`cu.prefix=${PREFIX}`]))
    .filter(c => c.name.startsWith(`${PREFIX}-pool-`)).map(c => c.id).sort()

  // docs/contract.md#warm-pool: the layout of a freshly created sandbox, as the reference.
  const user = { email: 'ann@example.com', emailRejected: false, name: 'Ann', mcpServers: [], credentials: { gitlabToken: 'tok' } }
  const fresh = await buildSandboxApp(t, PREFIX)
  await fresh.service.ensure('pool-fresh', { user })
  const freshLayout = await sh(fresh.service, 'pool-fresh', LAYOUT)
  const freshEnv = await sh(fresh.service, 'pool-fresh', 'env')
  t.same(await poolContainers(), [], 'SANDBOX_POOL_SIZE=0: no pool sandbox is made')
  const created = await client.inspect(`${PREFIX}-sbx-${chatKey('pool-fresh')}`)
  t.ok(created?.running, 'pool 0 creates as before')
  await fresh.app.close()
  /** What a monitor sees of a sandbox: its labels (the creation time's value aside), hostname, home volume's name form and labels. */
  const outside = async (name: string): Promise<unknown> => {
    const c = await client.inspect(name)
    const home = c?.storage.home ?? ''
    const vol = (await client.listVolumes([`cu.prefix=${PREFIX}`])).find(v => v.name === home)
    const labels = Object.fromEntries(Object.entries(c?.labels ?? {}).filter(([k]) => k.startsWith('cu.') || k === 'managed-by' || k === 'tool').map(([k, v]) => [k, k === 'cu.created-at' ? v.replace(/\d/g, '9') : v]))
    return { labels, volumeLabels: vol?.labels, volumeName: home.replace(/[0-9a-f]{32}$/, 'K') }
  }
  const createdOutside = await outside(`${PREFIX}-sbx-${chatKey('pool-fresh')}`)

  const dataDir = fresh.dataDir
  // Docker execs per container: a claimed sandbox's agent was opened while it waited in the pool.
  const execs: Array<{ id: string, argv: string }> = []
  const counting = wrapClient(real => ({
    exec: async (id: string, spec: ExecSpec) => { execs.push({ id, argv: spec.argv.join(' ') }); return await real.exec(id, spec) }
  }))
  let { app, service } = await buildSandboxApp(t, PREFIX, { poolSize: 2, client: counting }, dataDir)
  await until('a full pool', () => service.pooled() === 2)
  const pooledIds = await poolContainers()
  t.equal(pooledIds.length, 2, 'two pool sandboxes')

  t.test('claim: the layout of a fresh sandbox, uploads sent before the first call, outputs mapped', async t => {
    const chat = 'pool-a'
    const key = chatKey(chat)
    // An upload made before the chat's first tool call.
    await mkdir(join(dataDir, 'chats', key, 'uploads', 'sub'), { recursive: true })
    await writeFile(join(dataDir, 'chats', key, 'uploads', 'sub', 'early.txt'), 'early')
    const agentExecs = (id: string): number => execs.filter(e => e.id === id && e.argv.includes('cubicle-agent')).length
    await until('the pool sandboxes\' agents', () => pooledIds.every(id => agentExecs(id) === 1), 10_000)
    const t0 = performance.now()
    const info = await service.ensure(chat, { user })
    t.comment(`claim: ensure ${(performance.now() - t0).toFixed(0)} ms`)
    t.ok(pooledIds.includes(info.sandboxId), 'the container came from the pool')
    t.equal(info.name, `${PREFIX}-sbx-${key}`)
    const mine = (): string[] => execs.filter(e => e.id === info.sandboxId).map(e => e.argv)
    const before = mine().length
    const layout = await sh(service, chat, LAYOUT)
    t.same(mine().slice(before), [], 'the first command is served by the agent: no docker exec')
    t.equal(agentExecs(info.sandboxId), 1, 'the agent opened while the sandbox waited in the pool serves the chat: not opened again')
    t.equal(layout, freshLayout, 'mount table, owners and modes, user and env names equal a fresh sandbox\'s')
    const env = await sh(service, chat, 'env')
    t.match(env, /^CHAT_ID=pool-a$/m)
    t.match(env, /^GIT_AUTHOR_NAME=Ann$/m)
    t.match(env, /^GITLAB_TOKEN=tok$/m)
    const config = (s: string): string[] => s.split('\n').filter(l => !/^(CHAT_ID|HOSTNAME|CUBICLE_EXEC_ID|CUBICLE_ENGINE_EXEC)=/.test(l)).sort()
    t.same(config(env), config(freshEnv), 'the same configuration-derived environment')
    t.equal(await sh(service, chat, 'cat /mnt/user-data/uploads/sub/early.txt'), 'early', 'an upload sent before the claim is visible')
    await writeFile(join(dataDir, 'chats', key, 'uploads', 'late.txt'), 'late')
    t.equal(await sh(service, chat, 'cat /mnt/user-data/uploads/late.txt'), 'late', 'an upload sent after the claim is visible')
    await sh(service, chat, 'echo out > /mnt/user-data/outputs/o.txt; echo home > ~/h.txt')
    t.equal(await readFile(join(dataDir, 'chats', key, 'outputs', 'o.txt'), 'utf8'), 'out\n', 'outputs land in the chat\'s outputs dir')
    t.equal((await stat(join(dataDir, 'chats', key, 'outputs'))).mode & 0o777, 0o750)
    const record = JSON.parse(await readFile(join(dataDir, 'chats', key, 'sandbox.json'), 'utf8')) as Record<string, unknown>
    t.match(record, { chat_id: chat, home_volume: new RegExp(`^${PREFIX}-home-[0-9a-f]{32}$`), sandbox_id: info.sandboxId })
    t.notOk(JSON.stringify(record).includes('tok'), 'no secret in the record')
    const meta = JSON.parse(await readFile(join(dataDir, 'chats', key, 'meta.json'), 'utf8')) as Record<string, unknown>
    t.equal(meta.chat_id, chat)
    const c = await client.inspect(info.name)
    t.equal(c?.storage.home?.includes(record.home_volume as string), true, 'home is the slot\'s volume')
    t.same(await outside(info.name), createdOutside, 'labels, home volume name and labels as a created sandbox\'s: nothing pool-specific')
    t.equal(await sh(service, chat, 'hostname'), 'sandbox\n', 'the hostname of every sandbox')
    await until('the pool refilled', () => service.pooled() === 2)
    t.end()
  })

  t.test('10 concurrent new chats with a pool of 2: 10 containers, one per chat, none shared', async t => {
    const chats = Array.from({ length: 10 }, (_, i) => `pool-c${i}`)
    // Each chat asked 3 times at once.
    const infos = await Promise.all(chats.flatMap(chat => [0, 1, 2].map(async () => await service.ensure(chat))))
    const ids = new Set<string>()
    for (const chat of chats) {
      const mine = new Set(infos.filter(i => i.chatId === chat).map(i => i.sandboxId))
      t.equal(mine.size, 1, `${chat}: one container`)
      ids.add([...mine][0]!)
      t.equal(await sh(service, chat, 'printf %s "$CHAT_ID"'), chat, `${chat}: its own CHAT_ID`)
    }
    t.equal(ids.size, 10, 'no container shared')
    for (const chat of chats) t.equal((await containersOfChat(PREFIX, chatKey(chat))).length, 1, `${chat}: exactly one sandbox by label or name`)
    const all = await client.list([`cu.prefix=${PREFIX}`])
    t.equal(all.filter(c => c.name.includes('-sbx-') && chats.some(chat => c.name.endsWith(chatKey(chat)))).length, 10, '10 chat containers')
    await until('the pool refilled', () => service.pooled() === 2)
    t.end()
  })

  t.test('restart: pooled and claimed sandboxes re-adopted; interrupted claims finished or rolled back', async t => {
    const before = await poolContainers()
    // An interrupted claim before the rename: journal and record written, container still pooled.
    const [rollId, finishId] = before
    const slotOfId = async (id: string): Promise<string> => (await client.inspect(id))!.name.slice(`${PREFIX}-pool-`.length)
    const claimedA = await service.ensure('pool-a')
    const rollSlot = await slotOfId(rollId!)
    const finishSlot = await slotOfId(finishId!)
    const rollKey = chatKey('pool-roll')
    await mkdir(join(dataDir, 'chats', rollKey), { recursive: true })
    await writeFile(join(dataDir, 'pool', rollSlot, 'claim.json'), JSON.stringify({ chat_id: 'pool-roll' }))
    await writeFile(join(dataDir, 'chats', rollKey, 'sandbox.json'), JSON.stringify({ chat_id: 'pool-roll', slot: rollSlot, home_volume: `${PREFIX}-home-${rollSlot}` }))
    // An interrupted claim after the rename: dirs still in the slot.
    const finKey = chatKey('pool-fin')
    await mkdir(join(dataDir, 'chats', finKey), { recursive: true })
    await writeFile(join(dataDir, 'pool', finishSlot, 'claim.json'), JSON.stringify({ chat_id: 'pool-fin' }))
    await writeFile(join(dataDir, 'chats', finKey, 'sandbox.json'), JSON.stringify({ chat_id: 'pool-fin', slot: finishSlot, home_volume: `${PREFIX}-home-${finishSlot}`, sandbox_id: finishId, user_name: 'Fin' }))
    await app.close()
    t.equal(await client.claim(finishId!, { name: `${PREFIX}-sbx-${finKey}`, labels: {} }), true)
    ;({ app, service } = await buildSandboxApp(outer, PREFIX, { poolSize: 2 }, dataDir))
    await until('the pool re-adopted and refilled', () => service.pooled() === 2)
    const after = await poolContainers()
    t.ok(after.includes(rollId!), 'the rolled-back sandbox is back in the pool')
    await t.rejects(stat(join(dataDir, 'chats', rollKey, 'sandbox.json')), 'its chat record is gone')
    t.equal((await service.status('pool-fin')).state, 'running', 'the finished claim is re-adopted as its chat')
    await t.rejects(stat(join(dataDir, 'pool', finishSlot)), 'the slot dir moved into the chat')
    t.equal(await sh(service, 'pool-fin', 'printf %s "$CHAT_ID:$GIT_AUTHOR_NAME"; test -w /mnt/user-data/outputs && echo w'), 'pool-fin:Finw\n')
    t.equal((await service.status('pool-a')).state, 'running', 'the claimed chat runs after the restart')
    t.equal((await service.ensure('pool-a')).sandboxId, claimedA.sandboxId, 'the claimed chat gets the same sandbox after the restart')
    t.equal(await sh(service, 'pool-a', 'cat ~/h.txt; printf %s "$CHAT_ID"'), 'home\npool-a', 'a claimed chat after the restart: home kept, env given')
    t.equal((await containersOfChat(PREFIX, chatKey('pool-a'))).length, 1, 'still exactly one sandbox')
    t.end()
  })

  t.test('stop/start, drift recreation and removal behind our back keep home and outputs', async t => {
    const chat = 'pool-a'
    const key = chatKey(chat)
    const before = await service.ensure(chat)
    const volume = (JSON.parse(await readFile(join(dataDir, 'chats', key, 'sandbox.json'), 'utf8')) as { home_volume: string }).home_volume
    await service.stop(chat)
    const after = await service.ensure(chat)
    t.not(after.sandboxId, before.sandboxId, 'the stopped claimed sandbox is recreated (its mounts drifted)')
    const c = await client.inspect(after.name)
    t.equal(c?.storage.home, volume, 'recreated on its claimed volume')
    t.same(await outside(after.name), createdOutside, 'and still looks like a created sandbox')
    t.equal(await sh(service, chat, 'cat ~/h.txt /mnt/user-data/outputs/o.txt; printf %s "$CHAT_ID"'), 'home\nout\npool-a', 'home and outputs kept')
    await client.remove(after.sandboxId)
    const r = await service.runCommand(chat, 'cat ~/h.txt /mnt/user-data/outputs/o.txt', { timeoutMs: 60_000, onOutput: () => {} })
    t.equal(r.exitCode, 0, 'recreated after a removal behind our back')
    t.equal(await sh(service, chat, 'cat ~/h.txt'), 'home\n')
    await service.remove(chat, { purge: true })
    t.same((await client.listVolumes([`cu.prefix=${PREFIX}`])).filter(v => v.name === volume), [], 'purge removes the claimed volume')
    t.end()
  })

  t.test('no leaks: every container and volume is a chat\'s or the pool\'s', async t => {
    const containers = await client.list([`cu.prefix=${PREFIX}`])
    const volumes = (await client.listVolumes([`cu.prefix=${PREFIX}`])).map(v => v.name)
    const mounted = new Set<string>()
    for (const c of containers) {
      const d = await client.inspect(c.id)
      if (d?.storage.home != null) mounted.add(d.storage.home)
    }
    t.equal(containers.filter(c => c.name.startsWith(`${PREFIX}-pool-`)).length, 2, 'exactly the pool size unclaimed')
    t.same(volumes.filter(v => !mounted.has(v)), [], 'no volume without its container')
    t.end()
  })
})
