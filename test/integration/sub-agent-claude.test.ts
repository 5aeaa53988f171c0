// sub_agent with the real claude CLI (Claude Code) in a real sandbox, against the mock LLM.
import t from 'tap'
import { dockerOrSkip } from './docker.js'
import {
  bash, chatClient, mockRequests, scripted, sessionOf, startMock, subAgent, subAgentApp, waitFor
} from './sub-agent-app.js'
import { checkNoRowInSandbox, checkProgress, checkStopPaths, startTimeoutRun } from './sub-agent-checks.js'

const gate = await dockerOrSkip()

t.test('sub_agent runs claude in the chat sandbox', gate, async t => {
  const timeout = startTimeoutRun(t, 'claude', 'sa-claude')
  const { app, url } = await subAgentApp(t, 'claude')
  const headers = { 'X-User-Email': 'ada@example.com', 'X-Mcp-Servers': 'github,docker_ai,Jira', 'X-Anthropic-Api-Key': 'header-claude-key-0009' }
  const c = await chatClient(t, url, 'sa-claude', headers)
  await startMock(c)

  let session: string | undefined
  t.test('a new run writes the scripted file and reports docs/contract.md#sub-agent-result fields, with progress', async t => {
    const call = await subAgent(c, { task: scripted('out/hello.txt', 'Hello from claude', 'All done: wrote out/hello.txt', 'MOCK_PAUSE 2') })
    t.comment(`claude run: ${call.ms} ms`)
    t.notOk(call.result.isError, call.text)
    const lines = call.text.split('\n')
    t.equal(lines[0], '**Sub-Agent Completed** (success)')
    t.match(lines[1], /^\*\*Model:\*\* sonnet \| \*\*Turns:\*\* 2\/25 \| \*\*Cost:\*\* \$0\.\d{4} \| \*\*Duration:\*\* \d+\.\ds$/)
    t.notMatch(call.text, /\$0\.00(00)?\b/)
    t.equal(lines[3], 'All done: wrote out/hello.txt')
    session = sessionOf(call.text)
    t.match(session, /^[0-9a-f-]{36}$/)
    t.match(call.text, /\*\*Session ID:\*\* `[0-9a-f-]{36}` \(hint: pass it as resume_session_id to continue\)$/)
    t.equal(await bash(c, 'cat /home/assistant/out/hello.txt'), 'Hello from claude')
    checkProgress(t, call.progress, 3600)
    t.same(app.subAgent.runs('sa-claude'), [], 'the run is no longer listed')
  })

  t.test('the run used the header credentials, the user email header and the per-run directory', async t => {
    const calls = (await mockRequests(c)).filter(r => Array.isArray(r.tools) && (r.tools as unknown[]).length > 0)
    t.ok(calls.length >= 2)
    for (const r of calls) {
      t.equal(r.authorization, 'Bearer header-claude-key-0009', 'X-Anthropic-Api-Key wins over the server token for this run')
      t.equal(r.userEmail, 'ada@example.com', 'ANTHROPIC_CUSTOM_HEADERS carries the email')
      t.equal(r.model, 'claude-sonnet-4-6')
    }
    const plan = await bash(c, 'cat /home/assistant/.sub_agent/r-*/task_plan.md')
    t.match(plan, /MOCK_WRITE out\/hello\.txt Hello from claude/)
    t.match(await bash(c, 'stat -c %a /home/assistant/.sub_agent'), /^700/)
  })

  t.test('X-Mcp-Servers becomes ~/.mcp.json behind the gateway, blocklisted names dropped (docs/contract.md#sub-agent-mcp-servers)', async t => {
    const mcp = JSON.parse(await bash(c, 'cat /home/assistant/.mcp.json')) as { mcpServers: Record<string, { type: string, url: string, headers: Record<string, string> }> }
    t.same(Object.keys(mcp.mcpServers), ['github', 'jira'])
    t.same(mcp.mcpServers.github, {
      type: 'http', url: 'http://127.0.0.1:4010/mcp/github', headers: { 'x-openwebui-user-email': 'ada@example.com', Authorization: 'Bearer ${ANTHROPIC_AUTH_TOKEN}' }
    })
    t.same(JSON.parse(await bash(c, 'cat /home/assistant/.claude/settings.local.json')), { enabledMcpjsonServers: ['github', 'jira'] })
  })

  t.test('the claude credential row reaches the runs only, never the sandbox environment', async t => {
    checkNoRowInSandbox(t, await bash(c, 'env'), 'claude')
    t.equal(await bash(c, 'printf "[%s:%s]" "$SUBAGENT_CLI" "$ANTHROPIC_AUTH_TOKEN"'), '[claude:]')
  })

  t.test('resume keeps the session and runs the new task (docs/contract.md#sub-agent-execution)', async t => {
    t.ok(session !== undefined)
    const call = await subAgent(c, { task: scripted('out/second.txt', 'Second task text', 'Resumed and wrote out/second.txt'), resume_session_id: session })
    t.notOk(call.result.isError, call.text)
    t.match(call.text, /^\*\*Sub-Agent Completed\*\* \(success\)/)
    t.equal(sessionOf(call.text), session, 'same session')
    t.match(call.text, /\n\nResumed and wrote out\/second\.txt\n/)
    t.equal(await bash(c, 'cat /home/assistant/out/second.txt'), 'Second task text')
    const last = (await mockRequests(c)).filter(r => Array.isArray(r.tools) && (r.tools as unknown[]).length > 0).pop()
    t.match(last?.userText, /MOCK_WRITE out\/hello\.txt[\s\S]*MOCK_WRITE out\/second\.txt/, 'the resumed conversation holds the old and the new task')
  })

  t.test('sessions() lists the session for the terminal routes', async t => {
    const sessions = await app.subAgent.sessions('sa-claude')
    t.equal(sessions[0]?.session_id, session)
    t.equal(sessions[0]?.model, 'claude-sonnet-4-6')
    t.match(sessions[0]?.label, /^Create the file out\/hello\.txt/)
  })

  t.test('a bad working_directory, an alias on the wrong CLI and a busy chat are clear errors', async t => {
    const missing = await subAgent(c, { task: 'x', working_directory: '/no/such/dir' })
    t.equal(missing.result.isError, true)
    t.match(missing.text, /^Error: working_directory \/no\/such\/dir does not exist/)
    const relative = await subAgent(c, { task: 'x', working_directory: 'relative/dir' })
    t.match(relative.text, /^Error: invalid arguments: working_directory: must be an absolute path/)
    const badResume = await subAgent(c, { task: 'x', resume_session_id: '../../etc' })
    t.match(badResume.text, /^Error: invalid arguments: resume_session_id/)
    const empty = await subAgent(c, { task: '   ' })
    t.match(empty.text, /^Error: invalid arguments: task: must not be empty/)
  })

  await checkStopPaths(t, { cli: 'claude', app, client: c, chatId: 'sa-claude', processName: /^claude /, waitFor, timeout })
})
