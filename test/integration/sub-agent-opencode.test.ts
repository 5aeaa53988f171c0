// sub_agent with the real opencode CLI in a real sandbox, against the mock LLM (Chat Completions).
import t from 'tap'
import { dockerOrSkip } from './docker.js'
import { bash, chatClient, mockRequests, scripted, sessionOf, startMock, subAgent, subAgentApp, waitFor } from './sub-agent-app.js'
import { checkNoRowInSandbox, checkProgress, checkStopPaths, startTimeoutRun } from './sub-agent-checks.js'

const gate = await dockerOrSkip()
const agentCalls = async (c: Parameters<typeof mockRequests>[0]): Promise<Array<Record<string, unknown>>> =>
  (await mockRequests(c)).filter(r => r.path === '/v1/chat/completions' && Array.isArray(r.tools) && (r.tools as unknown[]).length > 0)

t.test('sub_agent runs opencode in the chat sandbox', gate, async t => {
  const timeout = startTimeoutRun(t, 'opencode', 'sa-opencode')
  const { app, url } = await subAgentApp(t, 'opencode')
  const c = await chatClient(t, url, 'sa-opencode')
  await startMock(c)

  let session: string | undefined
  t.test('a new run writes the scripted file; cost is the sum of step costs, turns the steps', async t => {
    const call = await subAgent(c, { task: scripted('out/hello.txt', 'Hello from opencode', 'Opencode wrote out/hello.txt', 'MOCK_PAUSE 2') })
    t.comment(`opencode run: ${call.ms} ms`)
    t.notOk(call.result.isError, call.text)
    const lines = call.text.split('\n')
    t.equal(lines[0], '**Sub-Agent Completed** (success)')
    // Two steps of 100 input and 20 output tokens at $1/$2 per million: 2 x $0.00014.
    t.match(lines[1], /^\*\*Model:\*\* mock\/mock-model \| \*\*Turns:\*\* 2\/25 \| \*\*Cost:\*\* \$0\.0003 \| \*\*Duration:\*\* \d+\.\ds$/)
    t.equal(lines[3], 'Opencode wrote out/hello.txt')
    session = sessionOf(call.text)
    t.match(session, /^ses_[A-Za-z0-9]+$/)
    t.equal(await bash(c, 'cat /home/assistant/out/hello.txt'), 'Hello from opencode')
    checkProgress(t, call.progress, 3600)
    const calls = await agentCalls(c)
    t.ok(calls.length >= 2)
    t.equal(calls[0]?.authorization, 'Bearer server-openrouter-key-0004', 'the provider key came from the environment through OPENCODE_CONFIG_EXTRA')
    const config = JSON.parse(await bash(c, 'cat /tmp/opencode.json')) as Record<string, unknown>
    t.match(config, { autoupdate: false, share: 'disabled', provider: { mock: { npm: '@ai-sdk/openai-compatible' } } })
  })

  t.test('the opencode credential row reaches the runs only, never the sandbox environment', async t => {
    checkNoRowInSandbox(t, await bash(c, 'env'), 'opencode')
    t.equal(await bash(c, 'printf "[%s]" "$OPENCODE_CONFIG"'), '[]', 'OPENCODE_CONFIG is set per run')
  })

  t.test('resume continues the session with the new task', async t => {
    const call = await subAgent(c, { task: scripted('out/second.txt', 'Second opencode task', 'Opencode resumed'), resume_session_id: session })
    t.notOk(call.result.isError, call.text)
    t.equal(sessionOf(call.text), session, 'same session')
    t.match(call.text, /\n\nOpencode resumed\n/)
    t.equal(await bash(c, 'cat /home/assistant/out/second.txt'), 'Second opencode task')
    const last = (await agentCalls(c)).pop()
    t.match(last?.userText, /MOCK_WRITE out\/hello\.txt[\s\S]*MOCK_WRITE out\/second\.txt/, 'old and new task in one conversation')
  })

  t.test('sessions() lists the session from opencode\'s SQLite store', async t => {
    const sessions = await app.subAgent.sessions('sa-opencode')
    t.equal(sessions[0]?.session_id, session)
    t.equal(sessions[0]?.model, 'mock-model')
  })

  await checkStopPaths(t, { cli: 'opencode', app, client: c, chatId: 'sa-opencode', processName: /(^|\/)opencode /, waitFor, timeout })
})
