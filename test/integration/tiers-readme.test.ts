/*
 * Tier 2 on real Docker: README.md inside a fresh sandbox, read the way the model reads it (bash_tool
 * cat), plus uploads appearing live and read-only at /mnt/user-data/uploads.
 */
import { randomBytes } from 'node:crypto'
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import type { FastifyInstance } from 'fastify'
import { buildApp, entry } from '../../core/app.js'
import { loadConfig } from '../../core/config.js'
import mcpTransport from '../../plugins/mcp-transport/index.js'
import capabilities from '../../plugins/capabilities/index.js'
import sandboxDocker from '../../plugins/sandbox-docker/index.js'
import sandbox from '../../plugins/sandbox/index.js'
import chatStorage from '../../plugins/chat-storage/index.js'
import workspaceTools from '../../plugins/workspace-tools/index.js'
import promptRender from '../../plugins/prompt-render/index.js'
import uploads from '../../plugins/uploads/index.js'
import tierReadme from '../../plugins/tier-readme/index.js'
import { connect } from '../fixtures/mcp-probe.js'
import { cleanupPrefix, DOCKER_HOST, dockerOrSkip, TEST_IMAGE } from './docker.js'
import { uploadFile } from '../fixtures/tiers-app.js'

const gate = await dockerOrSkip()
const prefix = `t-${randomBytes(3).toString('hex')}`

async function dockerApp (t: Test): Promise<{ app: FastifyInstance, url: string }> {
  const dataDir = await mkdtemp(join(tmpdir(), `${prefix}-data-`))
  const config = loadConfig({ LOG_LEVEL: 'silent', PUBLIC_BASE_URL: 'http://cubicle.test', DATA_DIR: dataDir, SANDBOX_PREFIX: prefix, DOCKER_IMAGE: TEST_IMAGE, SANDBOX_POOL_SIZE: '0' })
  const app = await buildApp(config, [
    entry(mcpTransport, { singleUserMode: 'lenient', publicBaseUrl: config.publicBaseUrl, allowedOrigins: [], maxBodyBytes: config.MCP_MAX_BODY_BYTES, keepAliveMs: 15000 }),
    entry(capabilities, { publicBaseUrl: config.publicBaseUrl }),
    entry(sandboxDocker, { dockerHost: DOCKER_HOST, dataDir }),
    entry(chatStorage, { dataDir }),
    entry(sandbox, { image: TEST_IMAGE, prefix, dataDir, memLimit: 512 * 1024 * 1024 }),
    entry(workspaceTools, { commandTimeoutS: 60, createTimeoutS: 60, maxOutputChars: 30000, progressIntervalS: 15 }),
    entry(promptRender, {}),
    entry(uploads, {}),
    entry(tierReadme, {})
  ], { logger: false })
  t.teardown(async () => { await app.close() })
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  return { app, url }
}

async function sh (c: Client, command: string): Promise<string> {
  const r = await c.callTool({ name: 'bash_tool', arguments: { command, description: 'tier-readme test' } }, undefined, { timeout: 120_000 }) as CallToolResult
  const block = r.content[0]
  return block?.type === 'text' ? block.text : ''
}

t.test('tier 2 and live uploads on real Docker', gate, async t => {
  await cleanupPrefix(t, prefix)
  const { app, url } = await dockerApp(t)
  const chat = `readme-${randomBytes(3).toString('hex')}`

  t.test('a fresh sandbox has the rendered prompt as README.md, owned by root, mode 0644', async t => {
    const c = await connect(t, url, { 'X-Chat-Id': chat, 'X-User-Email': 'ann@example.com' })
    const readme = await sh(c, 'cat /home/assistant/README.md')
    t.equal(readme, await app.prompts.render({ chatId: chat, email: 'ann@example.com' }), 'byte-identical to the render')
    t.match(readme.split('\n')[0], 'This is the contents of /home/assistant/README.md')
    t.equal(await sh(c, 'stat -c "%U:%G %a" /home/assistant/README.md'), 'root:root 644\n')
    t.match(await sh(c, 'echo tamper >> /home/assistant/README.md'), /Permission denied/, 'assistant cannot edit it in place')
  })

  t.test('the same user again does not rewrite it; another user does', async t => {
    const ann = await connect(t, url, { 'X-Chat-Id': chat, 'X-User-Email': 'ann@example.com' })
    const stamp = await sh(ann, 'stat -c "%i %y" /home/assistant/README.md')
    await sh(ann, 'true')
    t.equal(await sh(ann, 'stat -c "%i %y" /home/assistant/README.md'), stamp, 'untouched within the window')
    const bob = await connect(t, url, { 'X-Chat-Id': chat, 'X-User-Email': 'bob@example.com' })
    const readme = await sh(bob, 'cat /home/assistant/README.md')
    t.match(readme, 'User: bob@example.com')
    t.notMatch(readme, 'ann@example.com')
  })

  t.test('a restarted sandbox gets its README written again', async t => {
    await app.sandbox.stop(chat)
    const c = await connect(t, url, { 'X-Chat-Id': chat })
    t.equal(await sh(c, 'cat /home/assistant/README.md'), await app.prompts.render({ chatId: chat }))
  })

  t.test('an upload appears read-only in the running sandbox without a restart', async t => {
    const c = await connect(t, url, { 'X-Chat-Id': chat })
    await sh(c, 'true')
    t.equal(await uploadFile(url, chat, 'docs/live note.txt', 'uploaded while running\n'), 200)
    t.equal(await sh(c, 'cat "/mnt/user-data/uploads/docs/live note.txt"'), 'uploaded while running\n')
    t.match(await sh(c, 'echo x > /mnt/user-data/uploads/new.txt'), /Read-only file system|Permission denied/)
    t.equal(await uploadFile(url, chat, 'docs/live note.txt', 'replaced\n'), 200)
    t.equal(await sh(c, 'cat "/mnt/user-data/uploads/docs/live note.txt"'), 'replaced\n', 'an atomic replace is visible at once')
  })
})
