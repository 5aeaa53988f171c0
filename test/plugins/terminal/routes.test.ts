import t from 'tap'
import { rmSync, symlinkSync } from 'node:fs'
import { chatPaths } from '../../../core/chat-paths.js'
import { fakeSandbox, terminalApp, KEY, type ProbeAnswer } from './fakes.js'

/** A sandbox whose tmux session exists when `session.on`, with ps showing two claude processes and noise. */
function sandboxScript (session = { on: true }): ProbeAnswer {
  return argv => {
    const script = argv[2] ?? ''
    if (argv[0] === 'ps') {
      return [
        '    7   900 sleep infinity',
        '   20  3600 tmux -u new-session -A -s main',
        '   41   125 claude -p do things --model sonnet',
        '   42    61 node /usr/lib/node_modules/@anthropic-ai/claude-code/cli.js --resume abc',
        '   43    10 bash -c claude',
        '    1  9999 claude pretending to be init'
      ].join('\n') + '\n'
    }
    if (script.includes('has-session') && script.includes('echo yes')) return session.on ? 'yes\n' : 'no\n'
    if (script.includes('new-session -d')) { const was = session.on; session.on = true; return was ? 'exists\n' : 'created\n' }
    if (script.includes('kill-session')) { session.on = false; return 'done\n' }
    if (argv[3] === 'cubicle-kill') return 'term\n'
    return ''
  }
}

const auth = { authorization: `Bearer ${KEY}` }

t.test('status answers every state of docs/contract.md#terminal without starting anything or counting as activity', async t => {
  const session = { on: true }
  const fake = fakeSandbox(sandboxScript(session))
  const { app, writeMeta } = await terminalApp(t, fake)
  const status = async (chat: string): Promise<unknown> => (await app.inject({ url: `/terminal/${chat}/status`, headers: auth })).json()
  fake.setState('run', 'running')
  t.same(await status('run'), { active: true, running: true })
  session.on = false
  t.same(await status('run'), { active: false, running: true })
  fake.setState('stop', 'stopped')
  t.same(await status('stop'), { active: false, running: false, container_stopped: true })
  writeMeta('gone', { chat_id: 'gone', user_email: 'a@b.c' })
  t.same(await status('gone'), { active: false, running: false, meta_exists: true })
  t.same(await status('never'), { active: false, running: false })
  t.notOk(fake.calls.some(c => /^(ensure|touch|lease)/.test(c)), `no ensure, touch or lease: ${fake.calls.join(', ')}`)
  const res = await app.inject({ url: '/terminal/run/status', headers: auth })
  t.equal(res.headers['cache-control'], 'no-cache, no-store')
  t.equal(res.headers['access-control-allow-origin'], undefined, 'no Origin, no CORS header (never *)')
})

t.test('every route refuses a missing, foreign or files-only credential before looking at the sandbox', async t => {
  const fake = fakeSandbox(sandboxScript())
  const { app, token } = await terminalApp(t, fake)
  fake.setState('chat-a', 'running')
  // First the good credentials: 30 failures a minute from one address are throttled (core/auth.ts).
  const ok = await app.inject({ url: `/terminal/chat-a/status?t=${token('chat-a')}` })
  t.equal(ok.statusCode, 200, 'the chat\'s control token works in the query')
  const header = await app.inject({ url: '/terminal/chat-a/status', headers: { authorization: `Bearer ${token('chat-a')}` } })
  t.equal(header.statusCode, 200, 'and as a bearer token')
  fake.probes.length = 0
  const routes: Array<[string, string]> = [
    ['GET', 'status'], ['POST', 'start-ttyd'], ['POST', 'stop-ttyd'], ['POST', 'restart-container'], ['POST', 'resurrect-container'],
    ['GET', 'sessions'], ['GET', 'processes'], ['POST', 'processes/41/kill'], ['GET', 'heartbeat'], ['GET', 'ws']
  ]
  // Each route's failures come from an address of their own, below the limit of 30 a minute.
  for (const [i, [method, path]] of routes.entries()) {
    const remoteAddress = `10.0.0.${i + 1}`
    const url = `/terminal/chat-a/${path}`
    const none = await app.inject({ method: method as 'GET', url, remoteAddress })
    t.equal(none.statusCode, 401, `${path} without credentials`)
    t.equal(none.json().error, 'Unauthorized')
    const other = await app.inject({ method: method as 'GET', url: `${url}?t=${token('chat-b')}`, remoteAddress })
    t.equal(other.statusCode, 403, `${path} with another chat's control token`)
    t.equal(other.json().error, 'forbidden')
    const files = await app.inject({ method: method as 'GET', url: `${url}?t=${token('chat-a', 'f')}`, remoteAddress })
    t.equal(files.statusCode, 403, `${path} with a files token`)
    const wrongKey = await app.inject({ method: method as 'GET', url, headers: { authorization: 'Bearer nope' }, remoteAddress })
    t.equal(wrongKey.statusCode, 403, `${path} with a wrong key`)
    const bad = await app.inject({ method: method as 'GET', url: `/terminal/Bad..Id/${path}`, headers: auth, remoteAddress })
    t.equal(bad.statusCode, 400, `${path} with a malformed chat id`)
    t.equal(bad.json().error, 'invalid_chat_id')
  }
  t.notOk(fake.calls.length > 0 || fake.probes.length > 0, 'the sandbox was never asked anything')
})

t.test('nothing but restart and resurrect ever starts a sandbox', async t => {
  const fake = fakeSandbox(sandboxScript())
  const { app } = await terminalApp(t, fake)
  fake.setState('stopped-chat', 'stopped')
  for (const chat of ['stopped-chat', 'absent-chat']) {
    for (const [method, path, status] of [
      ['GET', 'status', 200], ['POST', 'start-ttyd', 404], ['POST', 'stop-ttyd', 404], ['GET', 'sessions', 200],
      ['GET', 'processes', 200], ['POST', 'processes/41/kill', 404], ['GET', 'heartbeat', 200], ['GET', 'ws', 426]
    ] as const) {
      const res = await app.inject({ method, url: `/terminal/${chat}/${path}`, headers: auth })
      t.equal(res.statusCode, status, `${method} ${path} on ${chat}`)
    }
  }
  const res = await app.inject({ url: '/terminal/absent-chat/processes', headers: auth })
  t.same(res.json(), { processes: [] })
  t.same((await app.inject({ url: '/terminal/absent-chat/sessions', headers: auth })).json(), { sessions: [] })
  t.same((await app.inject({ method: 'POST', url: '/terminal/absent-chat/start-ttyd', headers: auth })).json().error, 'sandbox_not_running')
  t.same(fake.calls.filter(c => /^(ensure|touch|lease)/.test(c)), [], 'no ensure, no activity')
})

t.test('start-ttyd creates session main once, with NO_AUTOSTART=1 in dangerous mode', async t => {
  const session = { on: false }
  const fake = fakeSandbox(sandboxScript(session))
  const { app } = await terminalApp(t, fake, { sessionEnv: { ANTHROPIC_AUTH_TOKEN: 'tok' }, cli: 'claude' })
  fake.setState('c1', 'running')
  const start = async (body?: unknown) => await app.inject({ method: 'POST', url: '/terminal/c1/start-ttyd', headers: auth, ...(body === undefined ? {} : { payload: body as object }) })
  const first = await start({ dangerous_mode: true })
  t.same(first.json(), { started: true })
  const create = fake.probes.find(p => (p.argv[2] ?? '').includes('new-session -d'))
  t.match(create?.argv[2], /-e NO_AUTOSTART=1/)
  t.equal(create?.opts.env?.ANTHROPIC_AUTH_TOKEN, 'tok', 'the session gets the CLI credentials (docs/contract.md#credential-allowlist) as exec environment')
  t.equal(create?.opts.env?.SUBAGENT_CLI, 'claude')
  t.same((await start()).json(), { started: false, already_running: true })
  session.on = false
  t.same((await start({ dangerous_mode: false })).json(), { started: true })
  const plain = fake.probes.filter(p => (p.argv[2] ?? '').includes('new-session -d')).at(-1)
  t.notMatch(plain?.argv[2], /NO_AUTOSTART/)
  t.equal((await start({ dangerous_mode: 'yes' })).statusCode, 400)
  t.equal((await start([1])).statusCode, 400)
  t.ok(fake.calls.includes('touch c1'), 'starting the session is activity')
})

t.test('stop-ttyd kills session main; restart starts only a stopped sandbox', async t => {
  const session = { on: true }
  const fake = fakeSandbox(sandboxScript(session))
  const { app, writeMeta } = await terminalApp(t, fake)
  fake.setState('c1', 'running')
  t.same((await app.inject({ method: 'POST', url: '/terminal/c1/stop-ttyd', headers: auth })).json(), { stopped: true })
  t.equal(session.on, false)
  const running = await app.inject({ method: 'POST', url: '/terminal/c1/restart-container', headers: auth })
  t.equal(running.statusCode, 404)
  t.equal(running.json().error, 'no_stopped_container')
  fake.setState('c2', 'stopped')
  writeMeta('c2', { chat_id: 'c2', user_email: 'ann@example.com', user_name: 'Ann', mcp_servers: ['github', 'BAD NAME'] })
  t.same((await app.inject({ method: 'POST', url: '/terminal/c2/restart-container', headers: auth })).json(), { restarted: true })
  t.ok(fake.calls.includes('ensure c2'))
  const absent = await app.inject({ method: 'POST', url: '/terminal/c3/restart-container', headers: auth })
  t.equal(absent.json().error, 'no_stopped_container')
})

t.test('resurrect-container recreates from meta.json only when no container exists', async t => {
  const fake = fakeSandbox(sandboxScript())
  const ensured: unknown[] = []
  const realEnsure = fake.sandbox.ensure.bind(fake.sandbox)
  fake.sandbox.ensure = async (chatId, opts) => { ensured.push(opts?.user); return await realEnsure(chatId, opts) }
  const { app, writeMeta } = await terminalApp(t, fake)
  const noMeta = await app.inject({ method: 'POST', url: '/terminal/r1/resurrect-container', headers: auth })
  t.equal(noMeta.statusCode, 404)
  t.equal(noMeta.json().error, 'no_meta')
  writeMeta('r1', { chat_id: 'r1', user_email: 'ann@example.com', user_name: 'Ann\u0007 Lee', mcp_servers: ['github', '../x'] })
  const ok = await app.inject({ method: 'POST', url: '/terminal/r1/resurrect-container', headers: auth })
  t.same(ok.json(), { resurrected: true, user_email: 'ann@example.com' })
  t.match(ensured[0], { email: 'ann@example.com', name: 'Ann Lee', mcpServers: ['github'] })
  const exists = await app.inject({ method: 'POST', url: '/terminal/r1/resurrect-container', headers: auth })
  t.equal(exists.statusCode, 409)
  t.equal(exists.json().error, 'container_exists')
  writeMeta('r2', { chat_id: 'r2', user_email: 'not an email' })
  t.same((await app.inject({ method: 'POST', url: '/terminal/r2/resurrect-container', headers: auth })).json(), { resurrected: true, user_email: null })
})

t.test('resurrect-container never follows a meta.json replaced by a symlink to another chat\'s record', async t => {
  const fake = fakeSandbox(sandboxScript())
  const { app, writeMeta, dataDir } = await terminalApp(t, fake)
  writeMeta('victim', { chat_id: 'victim', user_email: 'victim@example.com' })
  writeMeta('thief', { chat_id: 'thief', user_email: 'thief@example.com' })
  const own = chatPaths(dataDir, 'thief').meta
  rmSync(own)
  symlinkSync(chatPaths(dataDir, 'victim').meta, own)
  const res = await app.inject({ method: 'POST', url: '/terminal/thief/resurrect-container', headers: auth })
  t.equal(res.statusCode, 404, 'read through chat storage: a symlink is no record')
  t.equal(res.json().error, 'no_meta')
})

t.test('restart reports why the sandbox could not start', async t => {
  const fake = fakeSandbox(sandboxScript())
  fake.sandbox.ensure = async () => { throw Object.assign(new Error('sandbox capacity reached'), { code: 'SANDBOX_CAPACITY', statusCode: 503 }) }
  const { app } = await terminalApp(t, fake)
  fake.setState('c1', 'stopped')
  const res = await app.inject({ method: 'POST', url: '/terminal/c1/restart-container', headers: auth })
  t.equal(res.statusCode, 503)
  t.equal(res.json().error, 'capacity_reached')
})

t.test('processes lists only the active CLI, never PID 1, cached for 2 s, and is not activity', async t => {
  const fake = fakeSandbox(sandboxScript())
  const { app } = await terminalApp(t, fake)
  fake.setState('c1', 'running')
  const res = await app.inject({ url: '/terminal/c1/processes', headers: auth })
  t.same(res.json(), {
    processes: [
      { pid: 41, elapsed_minutes: 2, command: 'claude -p do things --model sonnet' },
      { pid: 42, elapsed_minutes: 1, command: 'node /usr/lib/node_modules/@anthropic-ai/claude-code/cli.js --resume abc' }
    ]
  })
  await app.inject({ url: '/terminal/c1/processes', headers: auth })
  t.equal(fake.probes.filter(p => p.argv[0] === 'ps').length, 1, 'the second poll within 2 s reuses the answer')
  t.equal(fake.probes[0]?.opts.user, 'assistant', 'ps runs as the sandbox user')
  t.same(fake.calls.filter(c => /^(ensure|touch|lease)/.test(c)), [], 'polling is not activity')
})

t.test('processes/{pid}/kill validates the pid strictly and kills only CLI processes', async t => {
  const fake = fakeSandbox(sandboxScript())
  const { app } = await terminalApp(t, fake)
  fake.setState('c1', 'running')
  for (const pid of ['1', '0', 'abc', '-5', '01', '4.2', '1e3', '99999999', '%31', '41 ']) {
    const res = await app.inject({ method: 'POST', url: `/terminal/c1/processes/${pid}/kill`, headers: auth })
    t.equal(res.statusCode, 400, `pid ${JSON.stringify(pid)}`)
    t.equal(res.json().error, 'bad_pid')
  }
  t.equal(fake.probes.filter(p => p.argv[3] === 'cubicle-kill').length, 0, 'no kill was attempted')
  for (const pid of ['7', '20', '43']) {
    const res = await app.inject({ method: 'POST', url: `/terminal/c1/processes/${pid}/kill`, headers: auth })
    t.equal(res.statusCode, 400, `pid ${pid} is not a claude process`)
  }
  const ok = await app.inject({ method: 'POST', url: '/terminal/c1/processes/41/kill', headers: auth })
  t.same(ok.json(), { killed: true, pid: 41 })
  const kill = fake.probes.find(p => p.argv[3] === 'cubicle-kill')
  t.same(kill?.argv.slice(4), ['41', 'claude -p do things --model sonnet', '20'], 'pid, the checked command line and 2 s in tenths')
  t.equal(kill?.opts.user, 'assistant', 'signals are sent as the sandbox user')
})

t.test('heartbeat records activity only for a running sandbox and never starts one', async t => {
  const fake = fakeSandbox(sandboxScript())
  const { app } = await terminalApp(t, fake)
  fake.setState('on', 'running')
  fake.setState('off', 'stopped')
  t.same((await app.inject({ url: '/terminal/on/heartbeat', headers: auth })).json(), { ok: true })
  t.same((await app.inject({ url: '/terminal/off/heartbeat', headers: auth })).json(), { ok: true })
  t.same((await app.inject({ url: '/terminal/none/heartbeat', headers: auth })).json(), { ok: true })
  t.same(fake.calls, ['touch on'])
})

t.test('a known path with another method answers 405 and preflights are answered', async t => {
  const fake = fakeSandbox()
  const { app } = await terminalApp(t, fake)
  const res = await app.inject({ method: 'DELETE', url: '/terminal/c1/status', headers: auth })
  t.equal(res.statusCode, 405)
  const pre = await app.inject({ method: 'OPTIONS', url: '/terminal/c1/start-ttyd', headers: { origin: 'null', 'access-control-request-method': 'POST' } })
  t.equal(pre.statusCode, 204)
  t.match(pre.headers['access-control-allow-methods'], /POST/)
  t.equal(pre.headers['access-control-allow-origin'], 'null', 'protected mode: the preview in an opaque-origin iframe may send its Bearer token')
})

t.test('sessions come from the sub-agent service: its lister runs as the sandbox user, its answer is re-validated', async t => {
  const fake = fakeSandbox(argv => argv[0] === '/usr/bin/python3'
    ? [
        JSON.stringify({ id: 'older', model: 'claude-sonnet-4-6', ts: 1700000000, label: 'first task' }),
        JSON.stringify({ id: 'newer', model: null, ts: 1700000100, label: `second\u001b[31m task ${'x'.repeat(200)}` }),
        JSON.stringify({ id: '../../etc/passwd', ts: 1700000200, label: 'hostile' })
      ].join('\n')
    : '')
  const { app } = await terminalApp(t, fake)
  fake.setState('c1', 'running')
  const { sessions } = (await app.inject({ url: '/terminal/c1/sessions', headers: auth })).json()
  t.same(sessions.map((s: { session_id: string }) => s.session_id), ['newer', 'older'], 'newest first, the bad id dropped')
  t.same(sessions[1], { session_id: 'older', model: 'claude-sonnet-4-6', timestamp: 1700000000, label: 'first task' })
  t.equal(sessions[0].label.length, 80)
  t.notMatch(sessions[0].label, /\u001b/) // eslint-disable-line no-control-regex
  t.equal(fake.probes[0]?.opts.user, 'assistant')
  t.same(fake.calls.filter(c => /^(ensure|touch|lease)/.test(c)), [], 'listing is not activity')
})

t.test('kill: SIGKILL after the grace is reported as killed, a process that changed is 400, a kill is activity', async t => {
  let answer = 'kill\n'
  const base = sandboxScript()
  const fake = fakeSandbox((argv, opts) => argv[3] === 'cubicle-kill' ? answer : base(argv, opts))
  const { app } = await terminalApp(t, fake, { killGraceMs: 500 })
  fake.setState('c1', 'running')
  const ok = await app.inject({ method: 'POST', url: '/terminal/c1/processes/42/kill', headers: auth })
  t.same(ok.json(), { killed: true, pid: 42 })
  t.equal(fake.probes.find(p => p.argv[3] === 'cubicle-kill')?.argv.at(-1), '5', 'killGraceMs goes to the sub-agent service (tenths)')
  t.ok(fake.calls.includes('touch c1'), 'a kill is activity')
  answer = 'gone\n'
  const gone = await app.inject({ method: 'POST', url: '/terminal/c1/processes/41/kill', headers: auth })
  t.equal(gone.statusCode, 400)
  t.equal(gone.json().error, 'bad_pid')
  t.match(gone.json().detail, /no longer a running claude process/)
  fake.setState('c1', 'stopped')
  const stopped = await app.inject({ method: 'POST', url: '/terminal/c1/processes/41/kill', headers: auth })
  t.equal(stopped.statusCode, 404)
  t.equal(stopped.json().error, 'sandbox_not_running', 'the sub-agent\'s error keeps the terminal\'s wire name')
})

t.test('without the sub-agent plugin the server boots, lists nothing and refuses kill clearly', async t => {
  const fake = fakeSandbox(sandboxScript())
  const { app } = await terminalApp(t, fake, { subAgent: false })
  t.notOk(app.hasDecorator('subAgent'))
  fake.setState('c1', 'running')
  t.same((await app.inject({ url: '/terminal/c1/processes', headers: auth })).json(), { processes: [] })
  t.same((await app.inject({ url: '/terminal/c1/sessions', headers: auth })).json(), { sessions: [] })
  const kill = await app.inject({ method: 'POST', url: '/terminal/c1/processes/41/kill', headers: auth })
  t.equal(kill.statusCode, 404)
  t.equal(kill.json().error, 'no_sub_agent')
  t.match(kill.json().detail, /no sub-agent plugin/)
  const bad = await app.inject({ method: 'POST', url: '/terminal/c1/processes/01/kill', headers: auth })
  t.equal(bad.json().error, 'bad_pid', 'the pid is still validated first')
  t.same(fake.probes.filter(p => !(p.argv[2] ?? '').includes('tmux')), [], 'nothing ran in the sandbox')
  t.same((await app.inject({ url: '/terminal/c1/status', headers: auth })).json(), { active: true, running: true }, 'the rest of the terminal works')
})
