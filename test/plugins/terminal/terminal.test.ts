// The terminal plugin (page, routes, socket, protocol, CORS), one group per part, all in one test process (docs/testing.md#the-unit-tiers-time).
import t from 'tap'
import { fakeSandbox, terminalApp, KEY, type ProbeAnswer, type FakeSandbox, type FakeTty } from './fakes.js'
import type { Test } from 'tap'
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { entry } from '../../../core/app.js'
import capabilities from '../../../plugins/capabilities/index.js'
import preview from '../../../plugins/preview/index.js'
import { pageCsp } from '../../../plugins/preview/page.js'
import { build, TEST_API_KEY } from '../../helper.js'
import { ATTACH_ARGV, detachArgv, frame, parseClientMessage, parseSize } from '../../../plugins/terminal/protocol.js'
import { exitMessage } from '../../../plugins/terminal/viewer.js'
import { chatPaths } from '../../../core/chat-paths.js'
import WebSocket from 'ws'

t.test('cors', async t => {
// The browser Origin rule on the terminal's HTTP routes (core/route-kit.ts chatRoutes, docs/architecture.md#security-model).
  const auth = { authorization: `Bearer ${KEY}` }

  t.test('CORS follows the Origin rule: an accepted origin is echoed, never *; a foreign page cannot change anything', async t => {
    const fake = fakeSandbox()
    fake.setState('c1', 'running')
    const { app, token } = await terminalApp(t, fake)
    const cors = async (headers: Record<string, string>): Promise<string | undefined> =>
      (await app.inject({ url: '/terminal/c1/heartbeat', headers })).headers['access-control-allow-origin'] as string | undefined
    t.equal(await cors({ ...auth, origin: 'null' }), 'null', 'null with a Bearer token')
    t.equal(await cors({ origin: 'null' }), undefined, 'null without a credential')
    t.equal(await cors({ ...auth, origin: 'https://chat.example' }), 'https://chat.example', 'ALLOWED_ORIGINS')
    t.equal(await cors({ ...auth, origin: 'https://evil.example' }), undefined, 'a foreign origin, even with a token')
    fake.calls.length = 0
    fake.probes.length = 0
    const stop = await app.inject({ method: 'POST', url: `/terminal/c1/stop-ttyd?t=${token('c1')}`, headers: { origin: 'https://evil.example' } })
    t.equal(stop.statusCode, 403, 'a POST from a foreign page is refused')
    t.equal(stop.json().error, 'forbidden_origin')
    t.same([...fake.calls, ...fake.probes], [], 'before the sandbox was asked anything')

    const open = await terminalApp(t, fake, { open: true })
    t.equal((await open.app.inject({ url: '/terminal/c1/heartbeat', headers: { origin: 'null' } })).headers['access-control-allow-origin'], undefined, 'open mode: null never gets CORS')
    const pre = await open.app.inject({ method: 'OPTIONS', url: '/terminal/c1/start-ttyd', headers: { origin: 'null', 'access-control-request-method': 'POST' } })
    t.equal(pre.headers['access-control-allow-origin'], undefined, 'open mode: nor a preflight from null')
    const post = await open.app.inject({ method: 'POST', url: '/terminal/c1/restart-container', headers: { origin: 'null' } })
    t.equal(post.statusCode, 403, 'open mode: a form POST from a sandboxed iframe is refused')
  })
})

t.test('page', async t => {
  const KEY = TEST_API_KEY

  async function app (t: Test, key = KEY) {
    const dataDir = mkdtempSync(join(tmpdir(), 'cubicle-term-page-'))
    t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
    return await build(t, { DATA_DIR: dataDir, MCP_API_KEY: key }, config => [
      entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: '', tokenTtlSeconds: config.LINK_TOKEN_TTL, publicBaseUrl: config.publicBaseUrl }),
      entry(preview, { frameAncestors: 'https://chat.example' })
    ])
  }

  const configOf = (html: string): Record<string, unknown> =>
    JSON.parse(/<script type="application\/json" id="config">(.*?)<\/script>/s.exec(html)?.[1] ?? 'null') as Record<string, unknown>

  t.test('GET /terminal/{chat} serves the full-window terminal to a control token only', async t => {
    const a = await app(t)
    const control = a.links.token('chat-1', 'c') as string
    const res = await a.inject({ url: `/terminal/chat-1?t=${control}` })
    t.equal(res.statusCode, 200)
    t.match(res.headers['content-type'], /^text\/html/)
    const nonce = /script-src 'nonce-([A-Za-z0-9+/]{22}==)' /.exec(String(res.headers['content-security-policy']))?.[1] ?? ''
    t.equal(res.headers['content-security-policy'], pageCsp('https://chat.example', nonce), 'the preview page\'s CSP, with its own nonce')
    t.equal(res.headers['cache-control'], 'no-cache, no-store, must-revalidate')
    t.same(configOf(res.body), { chatId: 'chat-1', token: control })
    t.notMatch(res.body.replace(/<script type="application\/json"[^]*?<\/script>|<script type="module" nonce="[^"]+" src="[^"]+"><\/script>/g, ''), /<script/, 'no inline script')
    t.ok(nonce !== '' && res.body.includes(`<script type="module" nonce="${nonce}" src="../static/preview/terminal-page.js">`), 'the page\'s one module carries the nonce')
    const again = await a.inject({ url: `/terminal/chat-1?t=${control}` })
    t.not(again.headers['content-security-policy'], res.headers['content-security-policy'], 'a fresh nonce per response')
    t.equal((await a.inject({ url: `/terminal/chat-1?t=${a.links.token('chat-1', 'f') as string}` })).statusCode, 403, 'a files token never opens a shell')
    t.equal((await a.inject({ url: `/terminal/chat-1?t=${a.links.token('chat-2', 'c') as string}` })).statusCode, 403, 'another chat\'s token')
    t.equal((await a.inject({ url: '/terminal/chat-1' })).statusCode, 401)
    t.equal((await a.inject({ url: '/terminal/a..b' })).statusCode, 400)
    const byKey = await a.inject({ url: '/terminal/chat-1', headers: { authorization: `Bearer ${KEY}` } })
    t.same(configOf(byKey.body), { chatId: 'chat-1', token: control }, 'an API-key opener gets a control token, never the key')
    t.notMatch(byKey.body, new RegExp(KEY))
  })

  t.test('in open mode the page carries no token', async t => {
    const a = await app(t, '')
    const res = await a.inject({ url: '/terminal/chat-1' })
    t.same(configOf(res.body), { chatId: 'chat-1', token: null })
  })

  t.test('the preview page offers the Browser and Terminal views in full scope only', async t => {
    const a = await app(t)
    const full = await a.inject({ url: `/preview/chat-1?t=${a.links.token('chat-1', 'c') as string}` })
    t.match(full.body, /data-view="outputs"/)
    t.match(full.body, /data-view="browser"/)
    t.match(full.body, /data-view="terminal"/)
    t.match(full.body, /id="terminal-pane"/)
    t.equal(configOf(full.body).scope, 'full')
    const files = await a.inject({ url: `/preview/chat-1?t=${a.links.token('chat-1', 'f') as string}` })
    t.equal(configOf(files.body).scope, 'files', 'the app keeps the view switcher hidden for a files token')
  })

  t.test('xterm.js and its fit addon are vendored from npm; only the listed files are reachable', async t => {
    const a = await app(t)
    for (const path of ['/static/vendor/xterm/lib/xterm.mjs', '/static/vendor/xterm-fit/lib/addon-fit.mjs', '/static/preview/terminal-view.js', '/static/preview/terminal-client.js', '/static/preview/terminal-page.js']) {
      const res = await a.inject({ url: path })
      t.equal(res.statusCode, 200, path)
      t.match(res.headers['content-type'], /javascript/, `${path} is served as a module script`)
      t.equal(res.headers['x-content-type-options'], 'nosniff')
    }
    const css = await a.inject({ url: '/static/vendor/xterm/css/xterm.css' })
    t.equal(css.statusCode, 200)
    t.match(css.headers['content-type'], /text\/css/)
    for (const path of ['/static/vendor/xterm/package.json', '/static/vendor/xterm/lib/xterm.js', '/static/vendor/xterm/src/browser/Terminal.ts', '/static/vendor/xterm-fit/package.json']) {
      const res = await a.inject({ url: path })
      t.not(res.statusCode, 200, `${path} is not served`)
      t.notMatch(res.body, /xterm\.js authors|"name": "@xterm/, 'nothing of the package leaks')
    }
    const view = await a.inject({ url: '/static/preview/terminal-view.js' })
    t.match(view.body, /from '\.\.\/vendor\/xterm\/lib\/xterm\.mjs'/, 'the view imports the vendored copy, never a CDN')
    t.notMatch(view.body, /https?:\/\//)
  })
})

t.test('protocol', async t => {
  const b = (s: string): Buffer => Buffer.from(s, 'utf8')

  t.test('client messages in ttyd framing', async t => {
    t.same(parseClientMessage(b('0ls -la\r')), { type: 'input', data: b('ls -la\r') })
    t.same(parseClientMessage(b('0ü€😀')), { type: 'input', data: b('ü€😀') }, 'UTF-8 input passes as bytes')
    t.same(parseClientMessage(b('1{"columns":120,"rows":40}')), { type: 'resize', size: { columns: 120, rows: 40 } })
    t.same(parseClientMessage(b('{"AuthToken":"x","columns":90,"rows":20}')), { type: 'resize', size: { columns: 90, rows: 20 } }, 'a later JSON message resizes')
    t.same(parseClientMessage(b('2')), { type: 'pause' })
    t.same(parseClientMessage(b('3')), { type: 'resume' })
    t.equal(parseClientMessage(b('')).type, 'ignored')
    t.equal(parseClientMessage(b('7abc')).type, 'ignored')
    t.equal(parseClientMessage(b('1{"columns":"80","rows":24}')).type, 'ignored', 'sizes must be numbers')
    t.equal(parseClientMessage(b('1[80,24]')).type, 'ignored')
    t.equal(parseClientMessage(b(`1{"columns":80,"rows":24,"pad":"${'x'.repeat(2000)}"}`)).type, 'ignored', 'a size message is small')
  })

  t.test('sizes are rounded and clamped to 1..1000 columns and 1..500 rows', async t => {
    t.same(parseSize(b('{"columns":100.6,"rows":29.4}')), { columns: 101, rows: 29 })
    t.same(parseSize(b('{"columns":0,"rows":-4}')), { columns: 1, rows: 1 })
    t.same(parseSize(b('{"columns":100000,"rows":100000}')), { columns: 1000, rows: 500 })
    t.equal(parseSize(b('{"columns":null,"rows":5}')), null)
    t.equal(parseSize(b('not json')), null)
  })

  t.test('server frames carry the command byte and the payload unchanged', async t => {
    t.same(frame(0x30, b('héllo')), Buffer.concat([b('0'), b('héllo')]))
    t.same(frame(0x31, 'title'), b('1title'))
    t.same(frame(0x32, '{}'), b('2{}'))
  })

  t.test('viewers attach to session main; detaching takes the viewer id as an argument, hex only', async t => {
    t.same(ATTACH_ARGV, ['tmux', '-u', 'new-session', '-A', '-s', 'main'])
    const argv = detachArgv('0123456789abcdef01234567')
    t.same(argv.slice(3), ['cubicle-detach', '0123456789abcdef01234567'])
    t.match(argv[2], /kill -HUP/)
    t.throws(() => detachArgv('x; reboot'))
    t.throws(() => detachArgv(''))
  })

  t.test('the tmux client\'s last line says why it ended', async t => {
    t.equal(exitMessage('\x1b[?1049l\x1b[23;0;0t[exited]\r\n'), 'ended')
    t.equal(exitMessage('[server exited]\r\n'), 'ended')
    t.equal(exitMessage('[detached (from session main)]\r\n'), 'detached')
    t.equal(exitMessage('[lost tty]\r\n'), 'detached')
    t.equal(exitMessage('[terminated]\r\n'), 'detached')
    t.equal(exitMessage('echo [exited]\r\n$ '), null, 'only as the very last output')
    t.equal(exitMessage(''), null, 'killed without a word')
  })
})

t.test('routes', async t => {
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
})

t.test('socket', async t => {
/** Opens a terminal socket; resolves with the socket or the refused handshake's HTTP status. */
  async function connect (url: string, opts: { origin?: string, protocols?: string[] } = {}): Promise<WebSocket | number> {
    const ws = new WebSocket(url.replace(/^http/, 'ws'), opts.protocols ?? ['tty'], opts.origin === undefined ? {} : { origin: opts.origin })
    return await new Promise((resolve, reject) => {
      ws.once('open', () => resolve(ws))
      ws.once('unexpected-response', (_req, res) => { resolve(res.statusCode ?? 0); ws.terminate() })
      ws.once('error', reject)
    })
  }

  interface Frames { all: Buffer[], text: () => string, next: (pred: (f: Buffer) => boolean) => Promise<Buffer> }
  function frames (ws: WebSocket): Frames {
    const all: Buffer[] = []
    const waiters: Array<{ pred: (f: Buffer) => boolean, resolve: (f: Buffer) => void }> = []
    ws.on('message', (data: Buffer) => {
      all.push(data)
      for (const w of [...waiters]) if (w.pred(data)) { waiters.splice(waiters.indexOf(w), 1); w.resolve(data) }
    })
    return {
      all,
      text: () => all.filter(f => f[0] === 0x30).map(f => f.subarray(1).toString()).join(''),
      next: async pred => await new Promise(resolve => {
        const hit = all.find(pred)
        if (hit !== undefined) resolve(hit)
        else waiters.push({ pred, resolve })
      })
    }
  }

  const closed = async (ws: WebSocket): Promise<{ code: number, reason: string }> =>
    await new Promise(resolve => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })))

  async function until (check: () => boolean, ms = 5000): Promise<void> {
    const end = Date.now() + ms
    while (!check()) {
      if (Date.now() > end) throw new Error('condition not met in time')
      await new Promise(resolve => setTimeout(resolve, 10))
    }
  }

  async function open (t: Test, fake: FakeSandbox, url: string, token: string, size = { columns: 100, rows: 30 }): Promise<{ ws: WebSocket, f: Frames, tty: FakeTty }> {
    const before = fake.ttys.length
    const ws = await connect(`${url}/terminal/c1/ws?t=${token}`)
    if (typeof ws === 'number') throw new Error(`handshake refused: ${ws}`)
    t.teardown(() => { ws.terminate() })
    const f = frames(ws)
    ws.send(JSON.stringify({ AuthToken: 'ignored', ...size }))
    await until(() => fake.ttys.length > before)
    const tty = fake.ttys[fake.ttys.length - 1] as FakeTty
    tty.output('\x1b[H\x1b[2J$ ') // tmux draws as soon as it attaches
    return { ws, f, tty }
  }

  t.test('the handshake is refused with HTTP statuses before any upgrade', async t => {
    const fake = fakeSandbox()
    const { url, token } = await terminalApp(t, fake, { maxViewers: 2 })
    const ws = (chat: string, tok?: string): string => `${url}/terminal/${chat}/ws${tok === undefined ? '' : `?t=${tok}`}`
    fake.setState('c1', 'running')
    t.equal(await connect(ws('c1')), 401, 'no token')
    t.equal(await connect(ws('c1', token('c2'))), 403, 'another chat\'s token')
    t.equal(await connect(ws('c1', token('c1', 'f'))), 403, 'a files token')
    t.equal(await connect(ws('c1', token('c1')), { origin: 'https://evil.example' }), 403, 'a foreign Origin')
    t.equal(await connect(ws('c1', token('c1')), { protocols: ['mqtt'] }), 400, 'not the tty subprotocol')
    t.equal(await connect(ws('n0', token('n0'))), 404, 'no running sandbox')
    t.equal(await connect(ws('Bad..Id', token('c1'))), 400, 'malformed chat id')
    t.same(fake.calls.filter(c => c.startsWith('ensure')), [], 'never starts a sandbox')
    for (const origin of ['null', 'http://cubicle.test', 'https://chat.example', undefined]) {
      const sock = await connect(ws('c1', token('c1')), origin === undefined ? {} : { origin })
      t.type(sock, WebSocket, `Origin ${origin ?? '(none)'} is allowed`)
      if (typeof sock !== 'number') { t.equal(sock.protocol, 'tty'); sock.close(); await closed(sock) }
    }
    t.equal(await connect(ws('c1'), { origin: 'null' }), 403, 'Origin null without a token')
    const res = await fetch(`${url}/terminal/c1/ws?t=${token('c1')}`)
    t.equal(res.status, 426, 'a plain GET is told to upgrade')
  })

  t.test('the Origin rule is core/origin.ts\'s (the one of /mcp), plus null with a token in protected mode', async t => {
    const fake = fakeSandbox()
    fake.setState('c1', 'running')
    const allowed = async (url: string, tok: string, origin: string): Promise<boolean> => {
      const sock = await connect(`${url}/terminal/c1/ws${tok === '' ? '' : `?t=${tok}`}`, { origin })
      if (typeof sock === 'number') return false
      sock.close()
      await closed(sock)
      return true
    }
    // PUBLIC_BASE_URL set: its loopback spellings are the same origin; another loopback port is not.
    const set = await terminalApp(t, fake, { env: { PUBLIC_BASE_URL: 'http://localhost:8081' } })
    for (const origin of ['http://localhost:8081', 'http://127.0.0.1:8081', 'http://[::1]:8081', 'https://chat.example', 'null']) {
      t.ok(await allowed(set.url, set.token('c1'), origin), `${origin} is allowed`)
    }
    const port = Number(new URL(set.url).port)
    for (const origin of [`http://127.0.0.1:${port}`, 'http://localhost:8082', 'https://localhost:8081', 'http://cubicle.test.evil.example', 'http://localhost:8081/path', 'garbage']) {
      t.notOk(await allowed(set.url, set.token('c1'), origin), `${origin} is refused`)
    }
    // PUBLIC_BASE_URL unset: the server's own http loopback origin on the port the socket arrived on.
    const unset = await terminalApp(t, fake, { env: { PUBLIC_BASE_URL: '' } })
    const own = Number(new URL(unset.url).port)
    t.ok(await allowed(unset.url, unset.token('c1'), `http://127.0.0.1:${own}`), 'own loopback origin while PUBLIC_BASE_URL is unset')
    t.ok(await allowed(unset.url, unset.token('c1'), `http://localhost:${own}`), 'its localhost spelling')
    t.notOk(await allowed(unset.url, unset.token('c1'), `http://127.0.0.1:${own + 1}`), 'another port')
    t.notOk(await allowed(unset.url, unset.token('c1'), `https://127.0.0.1:${own}`), 'https on that port is another origin')
    // Open mode: no token exists, so an opaque origin (any site's sandboxed iframe) never opens a shell.
    const open = await terminalApp(t, fake, { open: true, env: { PUBLIC_BASE_URL: '' } })
    const openPort = Number(new URL(open.url).port)
    t.notOk(await allowed(open.url, '', 'null'), 'open mode: null is refused')
    t.notOk(await allowed(open.url, '', 'https://evil.example'), 'open mode: a foreign origin is refused')
    t.ok(await allowed(open.url, '', `http://localhost:${openPort}`), 'open mode: the server\'s own loopback origin')
    const cli = await connect(`${open.url}/terminal/c1/ws`)
    t.type(cli, WebSocket, 'open mode: a client without Origin')
    if (typeof cli !== 'number') { cli.close(); await closed(cli) }
  })

  t.test('viewer cap: the ninth viewer of a chat is refused with 429', async t => {
    const fake = fakeSandbox()
    const { url, token } = await terminalApp(t, fake)
    fake.setState('c1', 'running')
    const open8 = []
    for (let i = 0; i < 8; i++) {
      const sock = await connect(`${url}/terminal/c1/ws?t=${token('c1')}`)
      if (typeof sock === 'number') throw new Error(`viewer ${i} refused with ${sock}`)
      t.teardown(() => { sock.terminate() })
      open8.push(sock)
    }
    t.equal(await connect(`${url}/terminal/c1/ws?t=${token('c1')}`), 429)
    open8[0]?.close()
    await until(() => fake.calls.filter(c => c === 'release c1').length === 1)
    t.type(await connect(`${url}/terminal/c1/ws?t=${token('c1')}`), WebSocket, 'a slot frees when a viewer leaves')
  })

  t.test('ttyd framing: size, title, preferences, input, output, resize, pause and resume', async t => {
    const fake = fakeSandbox()
    const { url, token } = await terminalApp(t, fake)
    fake.setState('c1', 'running')
    const { ws, f, tty } = await open(t, fake, url, token('c1'))
    t.equal((await f.next(b => b[0] === 0x31)).subarray(1).toString(), 'c1 · tmux main', 'title frame')
    t.equal((await f.next(b => b[0] === 0x32)).subarray(1).toString(), '{}', 'preferences frame')
    await until(() => tty.resizes.length > 0)
    t.same(tty.resizes[0], [100, 30], 'the first message sizes the TTY')
    t.same(tty.argv, ['tmux', '-u', 'new-session', '-A', '-s', 'main'])
    const viewerId = tty.opts.env?.CUBICLE_VIEWER
    t.match(viewerId, /^[0-9a-f]{24}$/, 'the exec carries the viewer id')
    t.equal(tty.opts.tty, true)
    t.equal(tty.opts.user, 'assistant')
    t.equal(tty.opts.cwd, '/home/assistant')
    t.ok(fake.calls.includes('lease c1 socket'), 'an open terminal holds a socket lease')

    await f.next(b => b[0] === 0x30)
    tty.output('hello ü\r\n')
    const out = await f.next(b => b[0] === 0x30 && b.includes('hello'))
    t.equal(out.subarray(1).toString(), 'hello ü\r\n', 'output frame')

    ws.send(Buffer.from('0echo hi\r'))
    ws.send('1{"columns":120,"rows":40}')
    await until(() => tty.input.length > 0 && tty.resizes.length > 1)
    t.equal(Buffer.concat(tty.input).toString(), 'echo hi\r')
    t.same(tty.resizes.at(-1), [120, 40])
    ws.send('1{"columns":1e9,"rows":-3}')
    await until(() => tty.resizes.length > 2)
    t.same(tty.resizes.at(-1), [1000, 1], 'sizes are clamped')
    ws.send('2')
    await until(() => tty.paused())
    t.ok(tty.paused(), 'pause stops reading the sandbox output')
    ws.send('3')
    await until(() => !tty.paused())
    t.notOk(tty.paused(), 'resume reads again')
    ws.send('9what')
    ws.send('1{not json')
    ws.send('0')
    const ended = closed(ws)
    ws.close()
    await ended
    await until(() => fake.calls.includes('release c1'))
    const detach = fake.probes.find(p => p.argv[3] === 'cubicle-detach')
    t.same(detach?.argv.slice(4), [viewerId], 'closing detaches exactly this viewer\'s tmux client')
    t.ok(fake.calls.includes('stream close'))
    t.same(fake.calls.filter(c => c.startsWith('ensure') || c.startsWith('touch')), [])
  })

  t.test('a client that stops reading pauses the sandbox output instead of buffering it', async t => {
    const fake = fakeSandbox()
    const { url, token } = await terminalApp(t, fake, { highWaterBytes: 256 * 1024, lowWaterBytes: 64 * 1024 })
    fake.setState('c1', 'running')
    const { ws, f, tty } = await open(t, fake, url, token('c1'))
    await f.next(b => b[0] === 0x32)
    // Stop reading at the TCP level: the server's send queue grows until the viewer pauses the stream.
    ;(ws as unknown as { _socket: { pause: () => void, resume: () => void } })._socket.pause()
    tty.flood(Buffer.alloc(64 * 1024, 'y'))
    // Docker's side keeps producing until the kernel's socket buffers and the high-water mark are
    // full; from then on nothing more is read.
    let plateau = -1
    for (let i = 0; i < 60 && tty.produced() < 64 * 1024 * 1024 && !(tty.paused() && tty.produced() === plateau); i++) {
      plateau = tty.produced()
      await new Promise(resolve => setTimeout(resolve, 300))
    }
    await new Promise(resolve => setTimeout(resolve, 1000))
    t.ok(tty.paused(), 'the stream stays paused')
    t.equal(tty.produced(), plateau, 'no more output is read while the client is not reading')
    t.ok(plateau < 16 * 1024 * 1024, `at most the socket buffers plus the high-water mark were read (${Math.round(plateau / 1024)} KiB)`)
    const later = plateau
  ;(ws as unknown as { _socket: { resume: () => void } })._socket.resume()
    await until(() => tty.produced() > later + 1024 * 1024, 20000)
    t.pass('reading again resumes the flood')
    ws.terminate()
  })

  t.test('sandbox stop closes viewers with 1001; a session that ends closes them with 1000', async t => {
    const fake = fakeSandbox(argv => (argv[2] ?? '').includes('has-session') ? 'no\n' : '')
    const { url, token } = await terminalApp(t, fake)
    fake.setState('c1', 'running')
    const a = await open(t, fake, url, token('c1'))
    const gone = closed(a.ws)
    fake.fireStop('c1')
    t.same(await gone, { code: 1001, reason: 'sandbox stopped' })
    const b = await open(t, fake, url, token('c1'))
    const ended = closed(b.ws)
    b.tty.output('\x1b[?1049l\x1b[23;0;0t[exited]\r\n')
    b.tty.end()
    t.same(await ended, { code: 1000, reason: 'session ended' }, 'tmux said [exited]')
    const d = await open(t, fake, url, token('c1'))
    const detached = closed(d.ws)
    d.tty.output('[detached (from session main)]\r\n')
    d.tty.end()
    t.same(await detached, { code: 1000, reason: 'detached' })
    const c = await open(t, fake, url, token('c1'))
    const stopped = closed(c.ws)
    fake.setState('c1', 'stopped')
    c.tty.end()
    t.same(await stopped, { code: 1001, reason: 'sandbox stopped' }, 'a stream lost with its sandbox')
    await until(() => fake.leases() === 0)
    t.equal(fake.probes.filter(p => p.argv[3] === 'cubicle-detach').length, 0, 'no detach when the client is already gone')
  })

  t.test('shutdown: viewers are told 1001, and one that never answers the close frame does not hold app.close()', async t => {
    const fake = fakeSandbox()
    const { app, url, token } = await terminalApp(t, fake)
    fake.setState('c1', 'running')
    const frozen = await open(t, fake, url, token('c1'))
    const live = await open(t, fake, url, token('c1'))
    const told = closed(live.ws)
    frozen.ws.pause() // reads nothing, so it never answers the server's close frame
    const start = Date.now()
    await app.close()
    const ms = Date.now() - start
    // Unbounded, server.close() waited for the frozen socket until ws's own 30 s close timeout.
    t.ok(ms < 15_000, `app.close() took ${ms} ms`)
    t.same(await told, { code: 1001, reason: 'server shutting down' })
    await until(() => fake.leases() === 0)
  })

  t.test('oversized messages close with 1009; without a size message the terminal opens at 80x24', async t => {
    const fake = fakeSandbox()
    const { url, token } = await terminalApp(t, fake, { maxMessageBytes: 4096, initTimeoutMs: 100 })
    fake.setState('c1', 'running')
    const sock = await connect(`${url}/terminal/c1/ws?t=${token('c1')}`)
    if (typeof sock === 'number') throw new Error('refused')
    await until(() => fake.ttys.length === 1)
    await until(() => (fake.ttys[0]?.resizes.length ?? 0) > 0)
    t.same(fake.ttys[0]?.resizes[0], [80, 24])
    const end = closed(sock)
    sock.send(Buffer.alloc(5000, 0x30))
    t.equal((await end).code, 1009)
  })

  t.test('input before the stream is attached is delivered in order', async t => {
    const fake = fakeSandbox()
    const { url, token } = await terminalApp(t, fake)
    fake.setState('c1', 'running')
    const sock = await connect(`${url}/terminal/c1/ws?t=${token('c1')}`)
    if (typeof sock === 'number') throw new Error('refused')
    t.teardown(() => { sock.terminate() })
    sock.send('{"columns":90,"rows":20}')
    sock.send('0a')
    sock.send('0b')
    await until(() => fake.ttys.length === 1 && (fake.ttys[0]?.input.length ?? 0) >= 2)
    t.equal(Buffer.concat(fake.ttys[0]?.input ?? []).toString(), 'ab')
  })
})
