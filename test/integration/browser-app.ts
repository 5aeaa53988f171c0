/*
 * The app the browser integration tests run (test/integration/browser-*.test.ts, test/serial/browser-hostile.test.ts): MCP transport,
 * capabilities, the Docker driver, the workspace tools, files, the CDP bridge and the preview page, in
 * protected mode, on a unique SANDBOX_PREFIX and a fixed free port so that PUBLIC_BASE_URL (and with it
 * the allowed WebSocket Origin) is the address the test's browser really uses.
 */
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import type { FastifyInstance } from 'fastify'
import WebSocket from 'ws'
import { entries, type PluginName } from '../../fastify.config.js'
import { build, freePort, TEST_API_KEY } from '../helper.js'
import { connect } from '../fixtures/mcp-probe.js'
import { removeByPrefix, TEST_IMAGE } from './docker.js'

export const KEY = TEST_API_KEY

export interface BrowserApp { app: FastifyInstance, url: string, prefix: string, dataDir: string }

/** `extra`: more plugins of the manifest to load (the app preview tests add `ports`). */
export async function browserApp (t: Test, env: Record<string, string> = {}, extra: PluginName[] = []): Promise<BrowserApp> {
  const prefix = `br-${randomBytes(4).toString('hex')}`
  const dataDir = await mkdtemp(join(tmpdir(), `${prefix}-data-`))
  t.teardown(async () => {
    await removeByPrefix(prefix)
    await rm(dataDir, { recursive: true, force: true })
  })
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  const app = await build(t, {
    SANDBOX_PREFIX: prefix, DATA_DIR: dataDir, DOCKER_IMAGE: TEST_IMAGE, MCP_API_KEY: KEY, PUBLIC_BASE_URL: url, COMMAND_TIMEOUT: '180', ...env
  }, config => entries(config, ['chat-storage', 'mcp-transport', 'capabilities', 'sandbox-docker', 'sandbox', 'workspace-tools', 'files', 'cdp-bridge', 'preview', ...extra]))
  await app.listen({ port, host: '127.0.0.1' })
  return { app, url, prefix, dataDir }
}

export async function mcpClient (t: Test, url: string, chatId: string): Promise<Client> {
  return await connect(t, url, { Authorization: `Bearer ${KEY}`, 'X-Chat-Id': chatId })
}

export const textOf = (r: CallToolResult): string => r.content.filter(c => c.type === 'text').map(c => (c as { text: string }).text).join('')

/** Runs a command through bash_tool, as the model does. */
export async function bash (c: Client, command: string): Promise<string> {
  const r = await c.callTool({ name: 'bash_tool', arguments: { command, description: 'browser test' } }, undefined, { timeout: 240_000 }) as CallToolResult
  return textOf(r)
}

/** A small site inside the sandbox, served on 127.0.0.1:8000, opened in the shared browser. */
export const SITE = `mkdir -p ~/site && cat > ~/site/index.html <<'EOF'
<!doctype html><html><head><title>Agent page</title>
<style>body{margin:0;font:16px sans-serif} #name{position:absolute;left:100px;top:200px;width:300px;height:30px} #go{position:absolute;left:100px;top:300px;width:120px;height:40px}</style></head>
<body><h1>Hello from the sandbox</h1>
<input id="name" aria-label="Name">
<button id="go" onclick="document.getElementById('out').textContent='Clicked: '+document.getElementById('name').value">Go</button>
<p id="out" style="position:absolute;top:400px;left:100px">waiting</p>
<script>document.getElementById('name').addEventListener('keydown', e => { if (e.key === 'Enter') document.getElementById('out').textContent = 'Entered: ' + e.target.value })</script>
</body></html>
EOF
(cd ~/site && nohup python3 -m http.server 8000 --bind 127.0.0.1 > ~/site.log 2>&1 &)
for i in $(seq 50); do curl -fs -o /dev/null http://127.0.0.1:8000/ && break; sleep 0.2; done
browser open http://127.0.0.1:8000/index.html`

/** A raw CDP client over a WebSocket URL: send(method, params) resolves with the result. */
export async function cdpClient (t: Test, url: string, headers: Record<string, string> = {}): Promise<{ ws: WebSocket, send: (method: string, params?: object) => Promise<any> }> {
  const ws = new WebSocket(url, { headers, maxPayload: 64 * 1024 * 1024 })
  await new Promise<void>((resolve, reject) => { ws.once('open', () => { resolve() }); ws.once('error', reject) })
  t.teardown(() => { ws.terminate() })
  let next = 1
  const waiting = new Map<number, (v: unknown) => void>()
  ws.on('message', data => {
    const msg = JSON.parse(data.toString()) as { id?: number, result?: unknown, error?: unknown }
    if (msg.id !== undefined) waiting.get(msg.id)?.(msg.error !== undefined ? { error: msg.error } : msg.result)
  })
  return {
    ws,
    send: async (method, params = {}) => await new Promise(resolve => {
      const id = next++
      waiting.set(id, resolve)
      ws.send(JSON.stringify({ id, method, params }))
    })
  }
}
