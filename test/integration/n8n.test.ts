/*
 * n8n as a real client. Headless n8n (scripts/n8n-install.sh: n8n 2.41.1 on Node 24 from
 * the npm registry, cached) imports integrations/n8n's credential and workflow and runs the
 * standalone MCP Client node against this server: bash_tool in a real sandbox. Skips loudly when n8n
 * cannot be installed (even under REQUIRE_DOCKER=1); fails when it is installed and the call fails.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { entries } from '../../fastify.config.js'
import { listen, TEST_API_KEY } from '../helper.js'
import { removeByPrefix } from './docker.js'
import { n8nOrSkip, n8nUser } from './n8n-home.js'

const { skip, home } = await n8nOrSkip()

t.test('n8n imports the example credential and workflow and its MCP Client node runs bash_tool in a sandbox', { skip }, async t => {
  const prefix = `t-${randomBytes(4).toString('hex')}`
  const work = await mkdtemp(join(tmpdir(), 'n8n-'))
  t.teardown(async () => { await removeByPrefix(prefix); await rm(work, { recursive: true, force: true }) })
  const { url } = await listen(t, { MCP_API_KEY: TEST_API_KEY, SANDBOX_PREFIX: prefix, DATA_DIR: join(work, 'data') },
    config => entries(config, ['chat-storage', 'mcp-transport', 'capabilities', 'sandbox-docker', 'sandbox', 'workspace-tools']))

  // The files as a user edits them: the key and the server address.
  const { n8n, importFiles } = await n8nUser(t, home, work)
  await importFiles({ credentials: ['cubicle.credentials.json'], workflows: ['cubicle-bash.workflow.json'] },
    [['<MCP_API_KEY>', TEST_API_KEY], ['http://localhost:8081/mcp', `${url}/mcp`]])
  const out = await n8n('execute', '--id', 'cubicleBashTool01', '--rawOutput')
  t.match(out, /"status": "success"/, 'the workflow ran')
  t.match(out, /"text": "hello from sandbox\\nLinux /, 'the tool output of bash_tool in the sandbox')
  t.notMatch(out, /isError": true/)
})
