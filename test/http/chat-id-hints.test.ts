/*
 * Requests without a chat id (Open WebUI's native MCP connection with its defaults sends none): the
 * note the model sees, the strict-mode error and the server's warning name Open WebUI's switch, and
 * /metrics counts such requests by MCP method and mode. Official SDK client over real HTTP.
 */
import t from 'tap'
import type { Test } from 'tap'
import { buildApp, entry } from '../../core/app.js'
import { entries } from '../../fastify.config.js'
import { testConfig, TEST_API_KEY } from '../helper.js'
import { connect, probePlugin, textOf, type Probe } from '../fixtures/mcp-probe.js'

const SWITCH = 'ENABLE_FORWARD_USER_INFO_HEADERS=true'
const AUTH = { Authorization: `Bearer ${TEST_API_KEY}` }

interface Server { url: string, probe: Probe, logs: Array<Record<string, unknown>> }

async function server (t: Test, env: Record<string, string>): Promise<Server> {
  const probe: Probe = { calls: [], aborted: [] }
  const logs: Array<Record<string, unknown>> = []
  const config = testConfig({ MCP_API_KEY: TEST_API_KEY, LOG_LEVEL: 'warn', DOCKER_HOST: 'unix:///nonexistent.sock', ...env })
  const app = await buildApp(config, [...entries(config, ['metrics', 'mcp-transport']), entry(probePlugin(probe), {})],
    { logStream: { write: line => { logs.push(JSON.parse(line) as Record<string, unknown>) } } })
  t.teardown(async () => { await app.close() })
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  return { url, probe, logs }
}

/** Samples of cubicle_requests_without_chat_id_total as `method mode` → value. */
async function chatless (url: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${url}/metrics`, { headers: AUTH })).text()
  const out: Record<string, number> = {}
  for (const line of text.split('\n')) {
    const m = /^cubicle_requests_without_chat_id_total\{method="([^"]+)",mode="([^"]+)"\} (\d+)$/.exec(line)
    if (m !== null) out[`${m[1] ?? ''} ${m[2] ?? ''}`] = Number(m[3])
  }
  return out
}

t.test('lenient mode: the note names Open WebUI\'s switch, the warning too, and the calls are counted', async t => {
  const s = await server(t, {})
  const none = await connect(t, s.url, AUTH)
  const result = await none.callTool({ name: 'whoami', arguments: {} })
  const text = textOf(result)
  t.match(text, /"chatId":"default"/, 'it ran in the shared default chat')
  t.match(text, /\n\n---\nNote: this request carried no chat id/)
  t.ok(text.includes(SWITCH), 'the note names ENABLE_FORWARD_USER_INFO_HEADERS=true')
  t.match(text, /X-OpenWebUI-Chat-Id/)
  t.match(text, /other users/, 'the note says the sandbox is shared with other users')
  await none.callTool({ name: 'whoami', arguments: {} })

  const warnings = s.logs.filter(l => typeof l.msg === 'string' && l.msg.includes('shared default sandbox'))
  t.equal(warnings.length, 1, 'one warning per interval')
  t.ok(String(warnings[0]?.msg).includes(SWITCH), 'the warning names the switch')
  t.equal(warnings[0]?.level, 40)

  const counts = await chatless(s.url)
  t.equal(counts['tools/call lenient'], 2, 'both tool calls counted')
  t.equal(counts['initialize lenient'], 1, 'the initialize request too')

  // A chat id in either header, as Open WebUI sends it with the switch on: no note, nothing counted.
  for (const header of ['X-Chat-Id', 'X-OpenWebUI-Chat-Id']) {
    const named = await connect(t, s.url, { ...AUTH, [header]: 'chat-7' })
    const r = textOf(await named.callTool({ name: 'whoami', arguments: {} }))
    t.match(r, /"chatId":"chat-7"/)
    t.notMatch(r, /Note:/)
  }
  const after = await chatless(s.url)
  t.equal(after['tools/call lenient'], 2, 'calls with a chat id are not counted')
  t.notMatch(JSON.stringify(after), /chat-7/)
})

t.test('strict mode: the error names the switch, nothing runs, the refusal is counted', async t => {
  const s = await server(t, { SINGLE_USER_MODE: 'false' })
  const none = await connect(t, s.url, AUTH)
  const result = await none.callTool({ name: 'whoami', arguments: {} })
  t.equal(result.isError, true)
  const text = textOf(result)
  t.match(text, /^Error: X-Chat-Id header is required \(SINGLE_USER_MODE=false\)\./)
  t.ok(text.includes(SWITCH), 'the error names ENABLE_FORWARD_USER_INFO_HEADERS=true')
  t.match(text, /X-OpenWebUI-Chat-Id/)
  t.same(s.probe.calls, [], 'nothing ran')
  const counts = await chatless(s.url)
  t.equal(counts['tools/call strict'], 1)
  t.equal(counts['tools/call lenient'], undefined)
})

t.test('SINGLE_USER_MODE=true: one shared sandbox on purpose, no note, nothing counted', async t => {
  const s = await server(t, { SINGLE_USER_MODE: 'true' })
  const none = await connect(t, s.url, AUTH)
  t.notMatch(textOf(await none.callTool({ name: 'whoami', arguments: {} })), /Note:/)
  t.same(await chatless(s.url), {})
})
