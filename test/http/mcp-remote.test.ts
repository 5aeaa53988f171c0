import t from 'tap'
import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { listen, TEST_API_KEY as KEY } from '../helper.js'
import { kernelManifest, textOf } from '../fixtures/mcp-probe.js'
import { tempDir } from '../fixtures/temp-dir.js'

// Claude Desktop reaches the server through the mcp-remote bridge (docs/contract.md#claude-desktop): a stdio MCP
// server that forwards to /mcp with the configured headers. It carries its own MCP client, which
// must parse our primed SSE streams and live with our session ids.

const proxy = createRequire(import.meta.url).resolve('mcp-remote/dist/proxy.js')

interface DesktopEntry { command: string, args: string[], env: Record<string, string> }
/** The entry of integrations/claude-desktop/claude_desktop_config.json, the file users copy. */
const desktopConfig = JSON.parse(await readFile(new URL('../../integrations/claude-desktop/claude_desktop_config.json', import.meta.url), 'utf8')) as
  { mcpServers?: Record<string, DesktopEntry> }
const found = desktopConfig.mcpServers?.['computer-use']
if (found === undefined) throw new Error('claude_desktop_config.json has no mcpServers["computer-use"]')
const desktop: DesktopEntry = found

t.test('Claude Desktop\'s mcp-remote bridge lists tools and runs a streamed call with progress', async t => {
  const { url } = await listen(t, { MCP_API_KEY: KEY }, kernelManifest({ calls: [], aborted: [] }))
  const configDir = await tempDir(t, 'cu-mcp-remote')
  let stderr = ''
  const transport = new StdioClientTransport({
    command: process.execPath,
    // Exactly the copy-paste config: `npx -y mcp-remote <url> --header Name:${VAR} …` with the key in
    // its env block (the header form of docs/contract.md#claude-desktop: Name:value, no space after the colon; mcp-remote
    // expands ${VAR}). Only the placeholders a user fills in are replaced.
    args: [proxy, ...desktop.args.slice(desktop.args.indexOf('mcp-remote') + 1).map(a => a === 'https://cubicle.example.com/mcp' ? `${url}/mcp` : a)],
    env: { ...desktop.env, CU_KEY: KEY, PATH: process.env.PATH ?? '', HOME: configDir, MCP_REMOTE_CONFIG_DIR: configDir },
    stderr: 'pipe'
  })
  transport.stderr?.on('data', (chunk: Buffer) => { stderr += chunk.toString('utf8') })
  t.same([desktop.command, ...desktop.args.slice(0, 2)], ['npx', '-y', 'mcp-remote'], 'the config starts the bridge from npm')
  t.equal(desktop.env.CU_KEY, '<MCP_API_KEY>', 'the key is a placeholder in the file')
  // What the bridge writes to its stdout, in order. The SDK client's onprogress is not the measure:
  // it handles a notification a microtask after the read, and a result in the same read removes the
  // call's progress handler first, so a bridge that batches the two (a loaded machine) loses it there.
  const forwarded: Array<{ method?: string, id?: unknown, params?: { progress?: number } }> = []
  transport.onmessage = message => { forwarded.push(message as typeof forwarded[number]) }
  const client = new Client({ name: 'claude-desktop-stand-in', version: '0.0.0' })
  t.teardown(async () => { await client.close() })
  await client.connect(transport)
  t.same((await client.listTools()).tools.map(x => x.name), ['whoami', 'slow', 'boom'])
  t.match(textOf(await client.callTool({ name: 'whoami', arguments: {} })), /"chatId":"desktop-1"/)
  const seen = forwarded.length
  const slow = await client.callTool({ name: 'slow', arguments: { ms: 200 } }, undefined, { onprogress: () => {} })
  t.equal(textOf(slow), 'done', 'a tools/call answered as a primed SSE stream comes through')
  const during = forwarded.slice(seen)
  t.same(during.filter(m => m.method === 'notifications/progress').map(m => m.params?.progress), [1], 'progress notifications are forwarded')
  t.ok(during.findIndex(m => m.method === 'notifications/progress') < during.findIndex(m => m.id !== undefined && m.method === undefined), 'the progress comes before the result')
  if (process.env.TEST_LOG === '1') t.comment(stderr)
  t.match(stderr, /Connected to remote server using StreamableHTTPClientTransport/)
  t.notMatch(stderr, /SyntaxError|Unexpected end of JSON|Error from remote server/, 'no parse errors on the bridge')
})
