// sub_agent with the real codex CLI (OpenAI Codex) in a real sandbox, against the mock LLM (Responses API).
import t from 'tap'
import { dockerOrSkip, TEST_IMAGE } from './docker.js'
import { agentsImageOrSkip, bash, chatClient, mockRequests, scripted, sessionOf, startMock, subAgent, subAgentApp, waitFor } from './sub-agent-app.js'
import { checkNoRowInSandbox, checkProgress, checkStopPaths, startTimeoutRun } from './sub-agent-checks.js'

// codex is not in the default slim image (docs/contract.md#skills): its runs use the agents image (slim + codex).
const gate = await agentsImageOrSkip()
const slimGate = await dockerOrSkip()
const agentCalls = async (c: Parameters<typeof mockRequests>[0]): Promise<Array<Record<string, unknown>>> =>
  (await mockRequests(c)).filter(r => r.path === '/v1/responses' && r.method === 'POST')

t.test('sub_agent runs codex in the chat sandbox', gate, async t => {
  const timeout = startTimeoutRun(t, 'codex', 'sa-codex')
  const { app, url } = await subAgentApp(t, 'codex')
  const c = await chatClient(t, url, 'sa-codex')
  await startMock(c)

  let session: string | undefined
  t.test('a new run writes the scripted file; turns and cost are unknown, the thread id is the session', async t => {
    const call = await subAgent(c, { task: scripted('out/hello.txt', 'Hello from codex', 'Codex wrote out/hello.txt', 'MOCK_PAUSE 2') })
    t.comment(`codex run: ${call.ms} ms`)
    t.notOk(call.result.isError, call.text)
    const lines = call.text.split('\n')
    t.equal(lines[0], '**Sub-Agent Completed** (success)')
    t.match(lines[1], /^\*\*Model:\*\* gpt-5-codex \| \*\*Turns:\*\* \?\/25 \| \*\*Cost:\*\* unavailable \| \*\*Duration:\*\* \d+\.\ds$/)
    t.equal(lines[3], 'Codex wrote out/hello.txt')
    session = sessionOf(call.text)
    t.match(session, /^[0-9a-f]{8}-[0-9a-f-]{27}$/)
    t.equal(await bash(c, 'cat /home/assistant/out/hello.txt'), 'Hello from codex')
    checkProgress(t, call.progress, 3600)
    t.ok(call.progress.some(p => /^Running: .*out\/hello\.txt/.test(p.message ?? '')), 'the command execution was reported')
    const calls = await agentCalls(c)
    t.ok(calls.length >= 2)
    t.equal(calls[0]?.authorization, 'Bearer server-openai-key-0002', 'OPENAI_API_KEY reached codex')
    t.match(calls[0]?.userText, /Your task is written in \/home\/assistant\/\.sub_agent\/r-[0-9a-z]+-[0-9a-f]{12}\/task_plan\.md[\s\S]*---\n\nCreate the file out\/hello\.txt/, 'system prompt, separator, task')
    t.equal(await bash(c, 'cat /home/assistant/.sub_agent/r-*/last_message.txt'), 'Codex wrote out/hello.txt', 'the last-message file is in the run directory')
  })

  t.test('the codex credential row reaches the runs only (OPENAI_API_KEY above), never the sandbox environment', async t => {
    checkNoRowInSandbox(t, await bash(c, 'env'), 'codex')
  })

  t.test('resume continues the thread with the new task', async t => {
    const call = await subAgent(c, { task: scripted('out/second.txt', 'Second codex task', 'Codex resumed'), resume_session_id: session })
    t.notOk(call.result.isError, call.text)
    t.equal(sessionOf(call.text), session, 'same thread')
    t.match(call.text, /\n\nCodex resumed\n/)
    t.equal(await bash(c, 'cat /home/assistant/out/second.txt'), 'Second codex task')
    const last = (await agentCalls(c)).pop()
    t.equal(last?.model, 'gpt-5-codex', 'the resumed run keeps the resolved model')
    t.match(last?.userText, /MOCK_WRITE out\/hello\.txt[\s\S]*MOCK_WRITE out\/second\.txt/, 'old and new task in one conversation')
  })

  t.test('a Claude alias is refused under codex', async t => {
    const call = await subAgent(c, { task: 'x', model: 'Sonnet' })
    t.equal(call.result.isError, true)
    t.match(call.text, /^Error: .*Claude-only.*CODEX_SUB_AGENT_DEFAULT_MODEL/)
  })

  t.test('sessions() lists the thread', async t => {
    const sessions = await app.subAgent.sessions('sa-codex')
    t.equal(sessions[0]?.session_id, session)
    t.equal(sessions[0]?.model, 'gpt-5-codex')
    t.match(sessions[0]?.label, /^Create the file out\/(hello|second)\.txt/)
  })

  await checkStopPaths(t, { cli: 'codex', app, client: c, chatId: 'sa-codex', processName: /(^|\/)codex /, waitFor, timeout })
})

// the default image has no codex; the tool says which image to build and set instead of failing obscurely.
t.test('on the slim image SUBAGENT_CLI=codex answers with the image that has codex', slimGate, async t => {
  const { url } = await subAgentApp(t, 'codex', { DOCKER_IMAGE: TEST_IMAGE })
  const c = await chatClient(t, url, 'sa-codex-slim')
  if ((await bash(c, 'command -v codex || echo none')).trim() !== 'none') {
    t.comment(`SKIPPED: the image under test has codex (DOCKER_IMAGE=${process.env.DOCKER_IMAGE ?? ''}); this check is for slim`)
    return
  }
  const call = await subAgent(c, { task: 'say hello' })
  t.equal(call.result.isError, true, 'the call is an error')
  t.match(call.text, 'the sandbox image has no `codex` command (SUBAGENT_CLI=codex)')
  t.match(call.text, 'bash sandbox-image/build.sh --target agents --tag computer-use-sandbox:agents')
  t.match(call.text, 'DOCKER_IMAGE=computer-use-sandbox:agents')
  t.equal((await bash(c, 'command -v claude opencode | wc -l')).trim(), '2', 'slim has claude and opencode')
})
