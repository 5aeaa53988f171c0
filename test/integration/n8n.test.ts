/*
 * n8n as a real client, both examples of integrations/n8n against one server. Headless n8n
 * (scripts/n8n-install.sh: n8n 2.41.1 on Node 24 from the npm registry, cached) imports the
 * credentials and workflows once, as a user edits them, then executes:
 * - the standalone MCP Client node workflow: bash_tool in a real sandbox;
 * - the AI Agent workflow: an AI Agent whose chat model is an OpenAI-compatible model (a scripted mock
 *   on loopback) and whose tool is the MCP Client Tool node on this server's /mcp (HTTP Streamable,
 *   "Multiple Headers" credential with Authorization and X-Chat-Id). The model calls bash_tool, the
 *   command runs in the chat's real sandbox, and the model's final answer carries its output.
 * Both workflows use the one credential, so both run in the credential's chat (one sandbox), as they
 * would for a user. Every n8n CLI start costs seconds: two imports and two executions in all.
 * Skips loudly when n8n cannot be installed (even under REQUIRE_DOCKER=1); fails when it is installed
 * and a call fails.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chatKey } from '../../core/chat-id.js'
import { entries } from '../../fastify.config.js'
import { listen, TEST_API_KEY } from '../helper.js'
import { containersOfChat, removeByPrefix } from './docker.js'
import { n8nOrSkip, n8nUser } from './n8n-home.js'
import { startOpenAiMock } from './openai-mock.js'

const { skip, home } = await n8nOrSkip()

t.test('n8n runs both integrations/n8n workflows against this server, in a real sandbox', { skip }, async t => {
  const prefix = `t-${randomBytes(4).toString('hex')}`
  const chatId = `n8n-${randomBytes(3).toString('hex')}`
  const work = await mkdtemp(join(tmpdir(), 'n8n-'))
  t.teardown(async () => { await removeByPrefix(prefix); await rm(work, { recursive: true, force: true }) })
  const dataDir = join(work, 'data')
  const { url } = await listen(t, { MCP_API_KEY: TEST_API_KEY, SANDBOX_PREFIX: prefix, DATA_DIR: dataDir },
    config => entries(config, ['chat-storage', 'mcp-transport', 'capabilities', 'sandbox-docker', 'sandbox', 'workspace-tools']))
  const llm = await startOpenAiMock(t, {
    tool: 'bash_tool',
    args: { command: 'echo n8n-agent-$((6*7)) | tee /mnt/user-data/outputs/n8n-agent.txt', description: 'run the requested command' },
    final: result => `The sandbox printed: ${result}`
  })

  // The files as a user edits them: the keys, the chat id, the server and model addresses.
  const { n8n, importFiles } = await n8nUser(t, home, work)
  await importFiles({
    credentials: ['cubicle.credentials.json', 'openai.credentials.json'],
    workflows: ['cubicle-bash.workflow.json', 'cubicle-agent.workflow.json']
  }, [
    ['<MCP_API_KEY>', TEST_API_KEY], ['"n8n-demo"', JSON.stringify(chatId)], ['http://localhost:8081/mcp', `${url}/mcp`],
    ['<OPENAI_API_KEY>', 'sk-mock'], ['https://api.openai.com/v1', llm.baseUrl], ['gpt-4.1-mini', 'mock-model']
  ])

  t.test('the MCP Client node runs bash_tool in a sandbox', async t => {
    const out = await n8n('execute', '--id', 'cubicleBashTool01', '--rawOutput')
    t.match(out, /"status": "success"/, 'the workflow ran')
    t.match(out, /"text": "hello from sandbox\\nLinux /, 'the tool output of bash_tool in the sandbox')
    t.notMatch(out, /isError": true/)
  })

  t.test('the AI Agent calls bash_tool through the MCP Client Tool node and answers with its output', async t => {
    const out = await n8n('execute', '--id', 'cubicleAiAgent01', '--rawOutput')
    t.match(out, /"status": "success"/, 'the workflow ran')
    // The tool result reaches the model as n8n's JSON text of the MCP content, so its quotes arrive escaped.
    t.match(out, /"output": "The sandbox printed: [^\n]*n8n-agent-42/, 'the agent answered with the command\'s output')

    t.equal(llm.requests.length, 2, 'the model was asked twice: before and after the tool call')
    const offered = (llm.requests[0]?.tools ?? []).map(tool => tool.function?.name)
    t.ok(offered.some(name => name === 'bash_tool' || name?.endsWith('__bash_tool') === true), `the MCP Client Tool offered bash_tool to the model (${offered.join(', ')})`)
    t.match(llm.requests[1]?.messages?.at(-1), { role: 'tool' }, 'the second request carries the tool result')
    const written = await readFile(join(dataDir, 'chats', chatKey(chatId), 'outputs', 'n8n-agent.txt'), 'utf8')
    t.equal(written, 'n8n-agent-42\n', 'the command really ran in the sandbox (its file is in the chat\'s outputs)')
    t.equal((await containersOfChat(prefix, chatKey(chatId))).length, 1, 'the X-Chat-Id of the credential got its own sandbox, one for both workflows')
  })
})
