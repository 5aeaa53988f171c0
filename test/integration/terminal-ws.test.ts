import t from 'tap'
import { chatKey } from '../../core/chat-id.js'
import { dockerOrSkip, containersOfChat } from './docker.js'
import { KEY, TermClient, terminalStack } from '../plugins/terminal/integration-app.js'
import { connect } from '../fixtures/mcp-probe.js'
import { pollUntil } from '../fixtures/poll.js'
import { textOf } from '../plugins/workspace-tools/integration-app.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'

const gate = await dockerOrSkip()

/** The HTTP status of a refused handshake (0 when it was accepted). */
async function refusal (opening: Promise<TermClient>): Promise<number> {
  try {
    const client = await opening
    await client.close()
    return 0
  } catch (err) { return (err as { status?: number }).status ?? -1 }
}

t.test('web terminal on real Docker', gate, async t => {
  const { app, url, prefix, token } = await terminalStack(t)
  const CHAT = 'term-main'
  const mcp = await connect(t, url, { Authorization: `Bearer ${KEY}`, 'X-Chat-Id': CHAT, 'X-User-Email': 'ann@example.com' })
  const bash = async (command: string): Promise<string> =>
    textOf(await mcp.callTool({ name: 'bash_tool', arguments: { command, description: 'test' } }) as CallToolResult)
  const api = async (path: string, method = 'GET', body?: unknown): Promise<{ status: number, json: Record<string, unknown> }> => {
    const res = await fetch(`${url}/terminal/${CHAT}/${path}`, {
      method,
      headers: { Authorization: `Bearer ${token(CHAT)}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    return { status: res.status, json: await res.json() as Record<string, unknown> }
  }
  await bash('true') // the model's first call creates the sandbox

  t.test('typing echo hi + Enter prints hi', async t => {
    const term = await TermClient.open(t, url, CHAT, token(CHAT))
    await term.waitFor(/\$ /)
    term.type('echo hi-$((20+22))\r')
    await term.waitFor(/hi-42/)
    t.pass('the command ran in the shared shell')
    t.match(term.titles[0], /term-main/)
    await term.close()
  })

  t.test('resizing to 100x30 makes tput cols print 100', async t => {
    const term = await TermClient.open(t, url, CHAT, token(CHAT), { columns: 80, rows: 24 })
    await term.waitFor(/\$ /)
    term.resize(100, 30)
    // The resize reaches the pty asynchronously, and tmux may apply the width before the height (a full run
    // read 100x23): ask again until both changed (at most 20 s).
    const m = await pollUntil(async () => {
      const from = term.received
      term.type('echo "size=$(tput cols)x$(tput lines)"\r')
      return await term.waitFor(/size=(\d+)x(\d+)/, 20000, from)
    }, m => m[1] !== '80' && m[2] !== '23', 20_000, 300)
    t.equal(m[1], '100')
    t.equal(m[2], '29', 'tmux keeps one line for its status bar')
    await term.close()
  })

  t.test('two viewers share session main and see the same output', async t => {
    // The previous case's viewer is let go by the server after its socket closed on the client's side:
    // wait for that, so the count below is of these two viewers.
    t.equal(await pollUntil(() => app.terminal.viewers(CHAT), n => n === 0), 0, 'earlier viewers were let go')
    const a = await TermClient.open(t, url, CHAT, token(CHAT))
    const b = await TermClient.open(t, url, CHAT, token(CHAT))
    await a.waitFor(/\$ /)
    await b.waitFor(/\$ /)
    t.equal(app.terminal.viewers(CHAT), 2)
    a.type('echo shared-$((3*5))\r')
    await a.waitFor(/shared-15/)
    await b.waitFor(/shared-15/)
    t.pass('the second viewer saw what the first typed')
    await a.close()
    await b.close()
  })

  t.test('bash_tool sees files made in the terminal, and the terminal sees the model\'s', async t => {
    const term = await TermClient.open(t, url, CHAT, token(CHAT))
    await term.waitFor(/\$ /)
    term.type('echo from-the-human > ~/human.txt && echo written-$((1+1))\r')
    await term.waitFor(/written-2/)
    t.equal(await bash('cat ~/human.txt'), 'from-the-human\n')
    await bash('echo from-the-model > ~/model.txt')
    const from = term.received
    term.type('cat ~/model.txt\r')
    await term.waitFor(/from-the-model/, 20000, from)
    await term.close()
  })

  t.test('closing the last viewer leaves tmux and what runs in it; no tmux client is left behind', async t => {
    const term = await TermClient.open(t, url, CHAT, token(CHAT))
    await term.waitFor(/\$ /)
    term.type('sleep 7777 & echo "bg=$!"; echo $$ > /tmp/term-shell.pid\r')
    const bg = (await term.waitFor(/bg=(\d+)/))[1] as string
    await term.close()
    t.equal(await pollUntil(() => app.terminal.viewers(CHAT), n => n === 0), 0, 'the server let the viewer go')
    // Its tmux client ends after the viewer's exec is closed: asked until it did (at most 30 s).
    const state = await pollUntil(async () => await bash(`tmux has-session -t =main && echo session-ok; kill -0 ${bg} && echo job-ok; kill -0 "$(cat /tmp/term-shell.pid)" && echo shell-ok; echo "clients=$(tmux list-clients | wc -l)"`),
      s => /clients=0/.test(s), 30_000, 250)
    t.match(state, /session-ok/)
    t.match(state, /job-ok/)
    t.match(state, /shell-ok/)
    t.match(state, /clients=0/, 'the closed viewer\'s tmux client was detached')
    const again = await TermClient.open(t, url, CHAT, token(CHAT))
    await again.waitFor(/\$ /)
    again.type('echo "same=$$"\r')
    const same = (await again.waitFor(/same=(\d+)/))[1]
    t.equal(same, (await bash('cat /tmp/term-shell.pid')).trim(), 'a new viewer finds the same shell')
    await again.close()
  })

  t.test('refused without a token, with another chat\'s token, with a bad Origin', async t => {
    t.equal(await refusal(TermClient.open(t, url, CHAT, '')), 401, 'no token')
    t.equal(await refusal(TermClient.open(t, url, CHAT, token('other-chat'))), 403, 'another chat\'s token')
    t.equal(await refusal(TermClient.open(t, url, CHAT, token(CHAT, 'f'))), 403, 'a files token')
    t.equal(await refusal(TermClient.open(t, url, CHAT, token(CHAT), undefined, 'https://evil.example')), 403, 'a foreign Origin')
    const ok = await TermClient.open(t, url, CHAT, token(CHAT), undefined, url)
    await ok.waitFor(/\$ /)
    await ok.close()
  })

  t.test('no route and no socket ever starts a sandbox', async t => {
    const FRESH = 'term-never-started'
    const h = { Authorization: `Bearer ${token(FRESH)}` }
    for (const [method, path] of [['GET', 'status'], ['POST', 'start-ttyd'], ['POST', 'stop-ttyd'], ['GET', 'sessions'], ['GET', 'processes'],
      ['POST', 'processes/42/kill'], ['GET', 'heartbeat']]) {
      const res = await fetch(`${url}/terminal/${FRESH}/${path}`, { method, headers: h })
      t.ok(res.status < 500, `${method} ${path}: ${res.status}`)
    }
    t.equal(await refusal(TermClient.open(t, url, FRESH, token(FRESH))), 404, 'the socket is refused, not served by a new sandbox')
    t.same(await containersOfChat(prefix, chatKey(FRESH)), [], 'no container was created')
    t.same((await api('status')).json, { active: true, running: true })
  })

  t.test('processes and kill: only the active CLI, never PID 1, TERM then KILL after 2 s', async t => {
    await bash('mkdir -p ~/bin && cp /bin/sleep ~/bin/claude')
    await bash('nohup ~/bin/claude 600 >/dev/null 2>&1 & nohup bash -c \'trap "" TERM; exec -a claude sleep 601\' >/dev/null 2>&1 & nohup sleep 602 >/dev/null 2>&1 & true')
    await new Promise(resolve => setTimeout(resolve, 2100)) // past the 2 s cache
    const { json } = await api('processes')
    const procs = json.processes as Array<{ pid: number, command: string, elapsed_minutes: number }>
    t.same(procs.map(p => p.command).sort(), ['/home/assistant/bin/claude 600', 'claude 601'])
    for (const pid of ['1', 'abc', '0', '-1', '1.5']) {
      const res = await api(`processes/${pid}/kill`, 'POST')
      t.equal(res.status, 400, `pid ${pid} refused`)
    }
    const sleeper = (await bash('pgrep -f "^sleep 602"')).trim()
    t.equal((await api(`processes/${sleeper}/kill`, 'POST')).status, 400, 'a process that is not the CLI is refused')
    t.match(await bash('cat /proc/1/cmdline | tr "\\0" " "'), /docker-init/, 'PID 1 lives on')
    const polite = procs.find(p => p.command.endsWith('600'))
    const stubborn = procs.find(p => p.command.endsWith('601'))
    const t0 = Date.now()
    t.same((await api(`processes/${polite?.pid}/kill`, 'POST')).json, { killed: true, pid: polite?.pid })
    t.ok(Date.now() - t0 < 2000, 'a process that obeys SIGTERM is gone at once')
    const t1 = Date.now()
    t.same((await api(`processes/${stubborn?.pid}/kill`, 'POST')).json, { killed: true, pid: stubborn?.pid })
    t.ok(Date.now() - t1 >= 2000, 'a process ignoring SIGTERM is killed after 2 s')
    t.equal(await bash(`kill -0 ${polite?.pid} ${stubborn?.pid} 2>/dev/null || echo both-gone`), 'both-gone\n')
    t.equal(await bash(`kill -0 ${sleeper} && echo alive`), 'alive\n')
    t.same((await api('processes')).json, { processes: [] })
  })

  t.test('sessions come from the CLI\'s own store, newest first', async t => {
    await bash(`mkdir -p ~/.claude/projects/-home-assistant && cd ~/.claude/projects/-home-assistant &&
      printf '%s\\n' '{"type":"user","sessionId":"11111111-aaaa-bbbb-cccc-000000000001","message":{"role":"user","content":"first task"}}' > 11111111-aaaa-bbbb-cccc-000000000001.jsonl &&
      printf '%s\\n' '{"type":"user","message":{"role":"user","content":"second task"}}' '{"type":"assistant","message":{"model":"claude-sonnet-4-6"}}' > 22222222-aaaa-bbbb-cccc-000000000002.jsonl &&
      touch -d '2025-01-01 00:00:00' 11111111-aaaa-bbbb-cccc-000000000001.jsonl && ln -s /dev/zero 33333333-aaaa-bbbb-cccc-000000000003.jsonl`)
    const { json } = await api('sessions')
    const sessions = json.sessions as Array<Record<string, unknown>>
    t.same(sessions.map(s => [s.session_id, s.model, s.label]), [
      ['22222222-aaaa-bbbb-cccc-000000000002', 'claude-sonnet-4-6', 'second task'],
      ['11111111-aaaa-bbbb-cccc-000000000001', null, 'first task']
    ], 'the symlink is not followed')
    t.equal(sessions[1]?.timestamp, Date.UTC(2025, 0, 1) / 1000)
  })

  t.test('stop-ttyd ends session main and its viewers; start-ttyd makes it again (dangerous mode)', async t => {
    const term = await TermClient.open(t, url, CHAT, token(CHAT))
    await term.waitFor(/\$ /)
    t.same((await api('stop-ttyd', 'POST')).json, { stopped: true })
    t.same(await term.closed, { code: 1000, reason: 'session ended' })
    t.same((await api('status')).json, { active: false, running: true })
    t.same((await api('start-ttyd', 'POST', { dangerous_mode: true })).json, { started: true })
    t.same((await api('start-ttyd', 'POST')).json, { started: false, already_running: true })
    t.equal(await bash('tmux show-environment -t main NO_AUTOSTART'), 'NO_AUTOSTART=1\n')
    t.match(await bash('tmux display -p -t main "#{pane_current_path}"'), '/home/assistant')
    t.same((await api('status')).json, { active: true, running: true })
  })

  t.test('a stopped sandbox closes its terminals with 1001 and restart-container starts it again', async t => {
    const term = await TermClient.open(t, url, CHAT, token(CHAT))
    await term.waitFor(/\$ /)
    await app.sandbox.stop(CHAT)
    t.same(await term.closed, { code: 1001, reason: 'sandbox stopped' })
    t.same((await api('status')).json, { active: false, running: false, container_stopped: true })
    t.equal((await api('resurrect-container', 'POST')).status, 409, 'a stopped container exists: resurrect refuses')
    t.same((await api('restart-container', 'POST')).json, { restarted: true })
    t.equal((await api('restart-container', 'POST')).json.error, 'no_stopped_container')
    const again = await TermClient.open(t, url, CHAT, token(CHAT))
    await again.waitFor(/\$ /)
    again.type('cat ~/human.txt\r')
    await again.waitFor(/from-the-human/)
    await again.close()
  })

  t.test('resurrect-container recreates a removed sandbox for the user in meta.json', async t => {
    await app.sandbox.remove(CHAT)
    t.same((await api('status')).json, { active: false, running: false, meta_exists: true })
    t.same((await api('resurrect-container', 'POST')).json, { resurrected: true, user_email: 'ann@example.com' })
    t.equal(await bash('cat ~/human.txt; echo "$GIT_AUTHOR_EMAIL"'), 'from-the-human\nann@example.com\n', 'home kept, user restored')
    const none = await fetch(`${url}/terminal/never-used/resurrect-container`, { method: 'POST', headers: { Authorization: `Bearer ${KEY}` } })
    t.equal(none.status, 404)
  })
})
