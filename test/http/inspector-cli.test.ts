import t from 'tap'
import { execFile } from 'node:child_process'
import { createRequire } from 'node:module'
import { dirname } from 'node:path'
import { promisify } from 'node:util'
import { listen, TEST_API_KEY } from '../helper.js'
import { kernelManifest } from '../fixtures/mcp-probe.js'

const run = promisify(execFile)
const cli = createRequire(import.meta.url).resolve('@modelcontextprotocol/inspector-cli/build/index.js')
// The CLI looks for its package.json relative to the working directory, so it runs from its own folder.
const opts = { timeout: 60000, cwd: dirname(cli) }

// A scripted session with a real third-party client: the MCP Inspector's CLI.
t.test('the MCP Inspector CLI lists tools and calls one against the running server', async t => {
  const { url } = await listen(t, { MCP_API_KEY: TEST_API_KEY }, kernelManifest({ calls: [], aborted: [] }))
  const common = [`${url}/mcp`, '--transport', 'http', '--header', `Authorization: Bearer ${TEST_API_KEY}`, '--header', 'X-Chat-Id: inspected']
  const list = await run(process.execPath, [cli, ...common, '--method', 'tools/list'], opts)
  const tools = (JSON.parse(list.stdout) as { tools: Array<{ name: string }> }).tools.map(x => x.name)
  t.same(tools, ['whoami', 'slow', 'boom'])
  const call = await run(process.execPath, [cli, ...common, '--method', 'tools/call', '--tool-name', 'whoami', '--tool-arg', 'n=3'], opts)
  t.match(call.stdout, /\\"chatId\\":\\"inspected\\"/)
  await t.rejects(run(process.execPath, [cli, `${url}/mcp`, '--transport', 'http', '--method', 'tools/list'], opts), 'no key, no tools')
})
