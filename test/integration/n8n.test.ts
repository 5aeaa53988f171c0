/*
 * issue #14: n8n as a real client. Headless n8n (scripts/n8n-install.sh: n8n 2.41.1 on Node 24 from
 * the npm registry, cached) imports integrations/n8n's credential and workflow and runs the
 * standalone MCP Client node against this server: bash_tool in a real sandbox. Skips loudly when n8n
 * cannot be installed (even under REQUIRE_DOCKER=1); fails when it is installed and the call fails.
 */
import t from 'tap'
import { execFile, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { entries } from '../../fastify.config.js'
import { listen, TEST_API_KEY } from '../helper.js'
import { dockerOrSkip, removeByPrefix } from './docker.js'

const run = promisify(execFile)
const root = fileURLToPath(new URL('../..', import.meta.url))

const gate = await dockerOrSkip()
let n8nHome = ''
let skip: string | false = gate.skip
if (skip === false) {
  const install = spawnSync('bash', ['scripts/n8n-install.sh'], { cwd: root, encoding: 'utf8', timeout: 3600_000 })
  if (install.status === 0) n8nHome = install.stdout.trim().split('\n').pop() ?? ''
  else skip = `SKIPPED: n8n could not be installed (scripts/n8n-install.sh): ${(install.stderr ?? '').trim().split('\n').slice(-3).join(' | ')}`
}

t.test('n8n imports the example credential and workflow and its MCP Client node runs bash_tool in a sandbox', { skip }, async t => {
  const prefix = `t-${randomBytes(4).toString('hex')}`
  const work = await mkdtemp(join(tmpdir(), 'n8n-'))
  t.teardown(async () => { await removeByPrefix(prefix); await rm(work, { recursive: true, force: true }) })
  const { url } = await listen(t, { MCP_API_KEY: TEST_API_KEY, SANDBOX_PREFIX: prefix, DATA_DIR: join(work, 'data') },
    config => entries(config, ['mcp-transport', 'capabilities', 'sandbox-docker', 'workspace-tools']))

  // The files as a user edits them: the key and the server address.
  const creds = (await readFile(join(root, 'integrations/n8n/cubicle.credentials.json'), 'utf8')).replace('<MCP_API_KEY>', TEST_API_KEY)
  const workflow = (await readFile(join(root, 'integrations/n8n/cubicle-bash.workflow.json'), 'utf8')).replace('http://localhost:8081/mcp', `${url}/mcp`)
  await writeFile(join(work, 'cred.json'), creds)
  await writeFile(join(work, 'wf.json'), workflow)
  const env = {
    PATH: process.env.PATH ?? '',
    HOME: work,
    N8N_USER_FOLDER: join(work, 'home'),
    N8N_ENCRYPTION_KEY: randomBytes(16).toString('hex'),
    N8N_DIAGNOSTICS_ENABLED: 'false',
    N8N_RUNNERS_ENABLED: 'false'
  }
  const n8n = async (...args: string[]): Promise<string> =>
    (await run(join(n8nHome, 'bin/n8n'), args, { env, maxBuffer: 32 * 1024 * 1024, timeout: 300_000 })).stdout

  t.match(await n8n('import:credentials', `--input=${join(work, 'cred.json')}`), /Successfully imported 1 credential/)
  t.match(await n8n('import:workflow', `--input=${join(work, 'wf.json')}`), /Successfully imported 1 workflow/)
  const out = await n8n('execute', '--id', 'cubicleBashTool01', '--rawOutput')
  t.match(out, /"status": "success"/, 'the workflow ran')
  t.match(out, /"text": "hello from sbx-[0-9a-f]+\\nLinux /, 'the tool output of bash_tool in the sandbox')
  t.notMatch(out, /isError": true/)
})
