/*
 * the copy-paste client configs of integrations/ are checked against the server itself.
 * LiteLLM (integrations/litellm/config.yaml, docs/contract.md#litellm): parsed as YAML; every forwarded header name,
 * sent lowercased as LiteLLM forwards it, has its effect on a live /mcp; allowed_tools is exactly
 * the server's tools/list. (Claude Desktop's JSON is run through mcp-remote by mcp-remote.test.ts;
 * Claude Code's line is the README's.) No Docker needed: listing tools does not start sandboxes.
 */
import t from 'tap'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parse } from 'yaml'
import { readUser } from '../../core/identity.js'
import { entries } from '../../fastify.config.js'
import { listen, TEST_API_KEY as KEY } from '../helper.js'
import { kernelManifest, textOf } from '../fixtures/mcp-probe.js'

const file = (path: string): Promise<string> => readFile(new URL(`../../integrations/${path}`, import.meta.url), 'utf8')

interface LiteLlmServer { url: string, transport: string, auth_type: string, auth_value: string, extra_headers: string[], allowed_tools: string[] }
const parsed = parse(await file('litellm/config.yaml')) as { mcp_servers?: Record<string, LiteLlmServer> }
const entry = parsed.mcp_servers?.computer_use
if (entry === undefined) throw new Error('integrations/litellm/config.yaml has no mcp_servers.computer_use')
const litellm: LiteLlmServer = entry

async function rpc (url: string, headers: Record<string, string>, method: string, params: object = {}): Promise<{ result: { tools?: Array<{ name: string }> } }> {
  const res = await fetch(`${url}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params })
  })
  return await res.json() as { result: { tools?: Array<{ name: string }> } }
}

t.test('LiteLLM: the server entry has the shape of docs/contract.md#litellm', async t => {
  t.match(litellm.url, /^https?:\/\/[^/]+\/mcp$/, 'the internal URL of /mcp')
  t.equal(litellm.transport, 'http', 'Streamable HTTP')
  t.equal(litellm.auth_type, 'bearer_token')
  t.equal(litellm.auth_value, '<MCP_API_KEY>', 'the key is a placeholder')
  t.same([...litellm.extra_headers].sort(), ['x-chat-id', 'x-mcp-servers', 'x-openwebui-chat-id', 'x-openwebui-user-email',
    'x-openwebui-user-name', 'x-user-email', 'x-user-name'], 'chat, user and sub-agent headers in both forms, no credentials')
})

t.test('LiteLLM: every forwarded header, lowercased, reaches the server under that name', async t => {
  const { url } = await listen(t, { MCP_API_KEY: KEY }, kernelManifest({ calls: [], aborted: [] }))
  const auth = { authorization: `Bearer ${KEY}` } // what auth_type bearer_token sends
  const whoami = async (headers: Record<string, string>): Promise<{ chatId: string, email: string | null, name: string | null }> =>
    JSON.parse(textOf((await rpc(url, { ...auth, ...headers }, 'tools/call', { name: 'whoami', arguments: {} })).result as never)) as never
  for (const name of litellm.extra_headers.filter(h => h.endsWith('chat-id'))) {
    t.equal((await whoami({ [name]: `via-${name}` })).chatId, `via-${name}`, name)
  }
  for (const name of litellm.extra_headers.filter(h => h.endsWith('user-email'))) {
    t.equal((await whoami({ 'x-chat-id': 'c1', [name]: 'ana@example.com' })).email, 'ana@example.com', name)
  }
  for (const name of litellm.extra_headers.filter(h => h.endsWith('user-name'))) {
    t.equal((await whoami({ 'x-chat-id': 'c1', [name]: 'Ana%20L%C3%B3pez' })).name, 'Ana López', name)
  }
  // X-Mcp-Servers only changes what sub_agent's CLI is given; it is read by the same function as above.
  t.same(readUser({ 'x-mcp-servers': 'github, jira' }).mcpServers, ['github', 'jira'], 'x-mcp-servers')
})

t.test('LiteLLM: allowed_tools is exactly the server\'s tool list', async t => {
  const dataDir = await mkdtemp(join(tmpdir(), 'client-configs-'))
  t.teardown(async () => { await rm(dataDir, { recursive: true, force: true }) })
  const { url } = await listen(t, { MCP_API_KEY: KEY, DATA_DIR: dataDir, DOCKER_HOST: 'unix:///nonexistent/docker.sock' },
    config => entries(config, ['chat-storage', 'mcp-transport', 'capabilities', 'sandbox-docker', 'sandbox', 'workspace-tools', 'runtime-cli', 'sub-agent']))
  const listed = (await rpc(url, { authorization: `Bearer ${KEY}` }, 'tools/list')).result.tools?.map(x => x.name)
  t.same(litellm.allowed_tools, listed, 'same names, same order')
})

t.test('Claude Code: the `claude mcp add` line uses HTTP transport, /mcp and both headers as the server names them', async t => {
  const block = /```bash\n([\s\S]*?)```/.exec(await file('claude-code/README.md'))?.[1] ?? ''
  const line = block.replace(/\\\n\s*/g, ' ').trim()
  t.match(line, /^claude mcp add --transport http computer-use https:\/\/[^ ]+\/mcp /)
  const headers = [...line.matchAll(/--header "([^:"]+): ([^"]+)"/g)].map(m => [(m[1] ?? '').toLowerCase(), m[2]])
  t.same(headers, [['authorization', 'Bearer <MCP_API_KEY>'], ['x-chat-id', 'my-project']])
})
