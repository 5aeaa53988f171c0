import t from 'tap'
import { mkdir, readFile, readdir, rm, stat, symlink, utimes, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import Fastify from 'fastify'
import { chatPaths } from '../../../core/chat-paths.js'
import { createEgressService } from '../../../plugins/egress/service.js'
import { createOverrideStore, loadUsersFile, MAX_OVERRIDE } from '../../../plugins/egress/store.js'
import { createChatStorage } from '../../../plugins/chat-storage/service.js'
import { Value } from 'typebox/value'
import { EgressOptions } from '../../../plugins/egress/schemas.js'
import { tempDir } from '../../fixtures/temp-dir.js'

// per-chat overrides persist (atomic, by descriptor, validated) and per-user defaults come from EGRESS_USERS.

interface Line { level: number, msg: string }

function logger (): { log: ReturnType<typeof Fastify>['log'], lines: Line[] } {
  const lines: Line[] = []
  const stream = { write: (s: string) => { lines.push(JSON.parse(s) as Line) } }
  return { log: Fastify({ logger: { level: 'info', stream } }).log, lines }
}

const OPTS = Value.Default(EgressOptions, {}) as Required<EgressOptions>

function service (dir: string, users?: Awaited<ReturnType<typeof loadUsersFile>>) {
  const { log, lines } = logger()
  const built = createEgressService({ sandbox: { network: () => null }, log, store: createOverrideStore(createChatStorage({ dataDir: dir }), log), ...(users === undefined ? {} : { users }) }, { ...OPTS, allow: 'mirror.corp' })
  return { ...built, lines }
}

const fileOf = (dir: string, chat: string): string => join(chatPaths(dir, chat).dir, 'egress.json')

t.test('an override survives a restart: stored atomically under the chat data dir, loaded when the sandbox starts', async t => {
  const dir = await tempDir(t, 'egress-store')
  const first = service(dir)
  const set = await first.service.setOverride('chat-a', { mode: 'allowlist', allow: ['pypi.org'] })
  t.match(set, { mode: 'allowlist', source: 'chat', allow: ['mirror.corp', 'pypi.org'] })
  const stored = JSON.parse(await readFile(fileOf(dir, 'chat-a'), 'utf8')) as unknown
  t.same(stored, { chatId: 'chat-a', mode: 'allowlist', allow: ['pypi.org'] })
  t.same((await readdir(chatPaths(dir, 'chat-a').dir)).filter(n => n.endsWith('.tmp')), [], 'no temporary file left')
  t.equal((await stat(fileOf(dir, 'chat-a'))).mode & 0o777, 0o644)
  await first.close()

  const second = service(dir) // a new server process
  t.match(await second.service.effective('chat-a'), { mode: 'allowlist', source: 'chat', override: { mode: 'allowlist', allow: ['pypi.org'] } }, 'read from disk')
  await second.attach('chat-a', { started: true })
  t.match(await second.service.effective('chat-a'), { mode: 'allowlist', source: 'chat' }, 'in force for the running sandbox')
  t.match(await second.service.setOverride('chat-a', null), { mode: 'open', source: 'server', override: null })
  await t.rejects(stat(fileOf(dir, 'chat-a')), { code: 'ENOENT' }, 'cleared: the file is removed')
  await second.close()
})

t.test('a purged chat loses its override: the next sandbox start re-reads the (now absent) file', async t => {
  const dir = await tempDir(t, 'egress-store')
  const s = service(dir)
  await s.service.setOverride('chat-p', { mode: 'off', allow: [] })
  await s.attach('chat-p', { started: true })
  t.match(await s.service.effective('chat-p'), { mode: 'off' })
  s.detach('chat-p')
  await rm(chatPaths(dir, 'chat-p').dir, { recursive: true }) // what the data purge does
  await s.attach('chat-p', { started: true })
  t.match(await s.service.effective('chat-p'), { mode: 'open', override: null })
})

t.test('a bad override file is logged and ignored, never fatal', async t => {
  const dir = await tempDir(t, 'egress-store')
  const cases: Array<[string, (path: string) => Promise<void>, RegExp]> = [
    ['not JSON', async p => { await writeFile(p, '{nope') }, /JSON/],
    ['another chat\'s file', async p => { await writeFile(p, JSON.stringify({ chatId: 'other', mode: 'open', allow: [] })) }, /another chat/],
    ['a bad rule', async p => { await writeFile(p, JSON.stringify({ chatId: 'c', mode: 'open', allow: ['*bad'] })) }, /invalid egress rule/],
    ['a bad mode', async p => { await writeFile(p, JSON.stringify({ chatId: 'c', mode: 'wide' })) }, /"mode" must be/],
    ['too large', async p => { await writeFile(p, `{"chatId":"c","allow":[],"pad":"${'x'.repeat(MAX_OVERRIDE)}"}`) }, /larger than/],
    ['a symlink', async p => { await writeFile(`${p}.target`, JSON.stringify({ chatId: 'c', mode: 'off' })); await symlink(`${p}.target`, p) }, /ELOOP|symbolic/],
    ['a directory', async p => { await mkdir(p) }, /not a regular file|EISDIR/]
  ]
  for (const [name, make, reason] of cases) {
    await rm(chatPaths(dir, 'c').dir, { recursive: true, force: true })
    await mkdir(chatPaths(dir, 'c').dir, { recursive: true })
    await make(fileOf(dir, 'c'))
    const s = service(dir)
    await s.attach('c', { started: true })
    t.match(await s.service.effective('c'), { mode: 'open', override: null }, `${name}: ignored`)
    const warn = s.lines.find(l => l.msg === 'egress override file ignored (unreadable or invalid)') as (Line & { err?: { message: string } }) | undefined
    t.match(warn?.err?.message ?? '', reason, `${name}: logged with the reason`)
  }
})

t.test('per-user defaults apply to a chat without an override; the chat\'s user comes from ensure, else meta.json', async t => {
  const dir = await tempDir(t, 'egress-store')
  const usersPath = join(dir, 'users.json')
  await writeFile(usersPath, JSON.stringify({ 'alice@example.com': { mode: 'allowlist', allow: ['pypi.org'] }, '@corp.example': { mode: 'off' } }))
  const { log } = logger()
  const users = await loadUsersFile(usersPath, log)
  const s = service(dir, users)
  await s.attach('chat-u', { started: true, user: { email: 'Alice@example.com' } })
  t.match(await s.service.effective('chat-u'), { mode: 'allowlist', source: 'user', allow: ['mirror.corp', 'pypi.org'], user: { email: 'Alice@example.com', mode: 'allowlist' } })
  await s.service.setOverride('chat-u', { mode: 'open', allow: [] })
  t.match(await s.service.effective('chat-u'), { mode: 'open', source: 'chat' }, 'the chat override wins over the user default')

  // After a restart the first ensure may carry no user (a re-adopted sandbox): meta.json names it.
  await mkdir(chatPaths(dir, 'chat-m').dir, { recursive: true })
  await writeFile(chatPaths(dir, 'chat-m').meta, JSON.stringify({ chat_id: 'chat-m', user_email: 'bob@corp.example' }))
  await s.attach('chat-m', { started: true })
  t.match(await s.service.effective('chat-m'), { mode: 'off', source: 'user' })
  await s.attach('chat-x', { started: true })
  t.match(await s.service.effective('chat-x'), { mode: 'open', source: 'server', user: null })
  await s.close()
})

t.test('EGRESS_USERS: a bad file stops boot; a bad new version keeps the last good one; a fixed one is re-read', async t => {
  const dir = await tempDir(t, 'egress-store')
  const path = join(dir, 'users.json')
  const { log, lines } = logger()
  await writeFile(path, '{"alice@example.com": {"mode": "closed"}}')
  await t.rejects(loadUsersFile(path, log), /"mode" must be open, allowlist, off or null/)
  await t.rejects(loadUsersFile(join(dir, 'missing.json'), log), /does not exist/)
  await writeFile(path, '{"alice@example.com": {"mode": "off"}}')
  const users = await loadUsersFile(path, log)
  t.equal(users.current().byEmail.get('alice@example.com')?.layer.mode, 'off')
  await writeFile(path, '{"alice@example.com": ')
  await utimes(path, new Date(), new Date(Date.now() + 2000))
  await users.check()
  t.equal(users.current().byEmail.get('alice@example.com')?.layer.mode, 'off', 'kept the last good defaults')
  t.ok(lines.some(l => /keeping the previous defaults/.test(l.msg)), 'logged')
  await writeFile(path, '{"alice@example.com": {"mode": "allowlist", "allow": ["pypi.org"]}}')
  await utimes(path, new Date(), new Date(Date.now() + 4000))
  await users.check()
  t.equal(users.current().byEmail.get('alice@example.com')?.layer.mode, 'allowlist', 're-read after the change')
})
