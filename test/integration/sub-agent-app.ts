/*
 * The app the sub-agent integration tests run: transport, capabilities, Docker driver, workspace
 * tools, runtime-cli, sub-agent and the prompt renderer, over real HTTP with the official SDK client,
 * plus the mock LLM (test/fixtures/mock-llm/server.mjs) started inside the chat's own sandbox on
 * loopback, so the real CLIs run without any LLM and without egress (ENABLE_NETWORK=false).
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import type { Test } from 'tap'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import type { CallToolResult, Progress } from '@modelcontextprotocol/sdk/types.js'
import type { FastifyInstance } from 'fastify'
import type { AppConfig } from '../../core/config.js'
import type { Entry } from '../../core/app.js'
import { entries, type PluginName } from '../../fastify.config.js'
import { listen } from '../helper.js'
import { connect } from '../fixtures/mcp-probe.js'
import { dockerOrSkip, removeByPrefix, TEST_IMAGE, testDockerClient } from './docker.js'

export const MOCK_PORT = 4010
/** The image with codex, which slim leaves out for its size (docs/contract.md#skills): build.sh's agents target (slim + codex). */
export const AGENTS_IMAGE = process.env.AGENTS_IMAGE ?? 'computer-use-sandbox:agents'
export const MOCK_URL = `http://127.0.0.1:${MOCK_PORT}`
const MOCK_SCRIPT = fileURLToPath(new URL('../fixtures/mock-llm/server.mjs', import.meta.url))

/** Every CLI's credential row, set on the server at once (docs/contract.md#credential-allowlist: only the active CLI's row may reach a sandbox). */
export const ALL_CREDENTIALS: Record<string, string> = {
  ANTHROPIC_AUTH_TOKEN: 'server-claude-token-0001',
  ANTHROPIC_BASE_URL: MOCK_URL,
  ANTHROPIC_DEFAULT_HAIKU_MODEL: 'claude-haiku-test',
  OPENAI_API_KEY: 'server-openai-key-0002',
  OPENAI_BASE_URL: `${MOCK_URL}/v1`,
  AZURE_OPENAI_API_KEY: 'server-azure-key-0003',
  OPENROUTER_API_KEY: 'server-openrouter-key-0004',
  ANTHROPIC_API_KEY: 'server-anthropic-api-key-0005',
  CODEX_CONFIG_EXTRA: [
    'model_provider = "mock"',
    '[model_providers.mock]',
    'name = "Mock"',
    `base_url = "${MOCK_URL}/v1"`,
    'env_key = "OPENAI_API_KEY"',
    'wire_api = "responses"',
    'supports_websockets = false'
  ].join('\n'),
  OPENCODE_CONFIG_EXTRA: JSON.stringify({
    provider: {
      mock: {
        npm: '@ai-sdk/openai-compatible',
        name: 'Mock',
        options: { baseURL: `${MOCK_URL}/v1`, apiKey: '{env:OPENROUTER_API_KEY}' },
        models: { 'mock-model': { name: 'Mock model', cost: { input: 1, output: 2 } } }
      }
    }
  }),
  OPENCODE_MODEL: 'mock/mock-model',
  VISION_API_KEY: ''
}

/** dockerOrSkip for the codex runs: also needs AGENTS_IMAGE (skips loudly; an error under REQUIRE_DOCKER=1). */
export async function agentsImageOrSkip (): Promise<{ skip: string | false }> {
  const base = await dockerOrSkip()
  if (base.skip !== false) return base
  const client = testDockerClient()
  try {
    if (await client.imageId(AGENTS_IMAGE) !== null) return base
  } finally { client.close() }
  const reason = `sandbox image ${AGENTS_IMAGE} (slim + codex) is missing (bash sandbox-image/build.sh --target agents --tag ${AGENTS_IMAGE})`
  if (process.env.REQUIRE_DOCKER === '1') throw new Error(`REQUIRE_DOCKER=1: ${reason}`)
  return { skip: reason }
}

export function subAgentManifest (config: AppConfig, extra: PluginName[] = []): Entry[] {
  return entries(config, ['chat-storage', 'mcp-transport', 'capabilities', 'sandbox-docker', 'sandbox', 'workspace-tools', 'runtime-cli', 'sub-agent', 'prompt-render', ...extra])
}

export interface SubAgentApp { app: FastifyInstance, url: string, prefix: string, dataDir: string }

/**
 * Boots the app for one CLI on its own SANDBOX_PREFIX and DATA_DIR (codex on AGENTS_IMAGE), with the
 * manifest's `extra` plugins too; teardown removes everything.
 */
export async function subAgentApp (t: Test, cli: string, env: Record<string, string> = {}, extra: PluginName[] = []): Promise<SubAgentApp> {
  const prefix = `sa-${randomBytes(4).toString('hex')}`
  const dataDir = await mkdtemp(join(tmpdir(), 'sa-data-'))
  t.teardown(async () => {
    await removeByPrefix(prefix)
    await rm(dataDir, { recursive: true, force: true })
  })
  const { app, url } = await listen(t, {
    SANDBOX_PREFIX: prefix,
    DATA_DIR: dataDir,
    DOCKER_IMAGE: cli === 'codex' ? AGENTS_IMAGE : TEST_IMAGE,
    ENABLE_NETWORK: 'false',
    SUBAGENT_CLI: cli,
    PROGRESS_INTERVAL_SECONDS: '5',
    ...ALL_CREDENTIALS,
    ...env
  }, config => subAgentManifest(config, extra))
  return { app, url, prefix, dataDir }
}

export async function chatClient (t: Test, url: string, chatId: string, headers: Record<string, string> = {}): Promise<Client> {
  return await connect(t, url, { 'X-Chat-Id': chatId, ...headers })
}

export const textOf = (r: CallToolResult | Record<string, unknown>): string => {
  const block = (r as CallToolResult).content?.[0]
  return block?.type === 'text' ? block.text : ''
}

export async function bash (c: Client, command: string): Promise<string> {
  return textOf(await c.callTool({ name: 'bash_tool', arguments: { command, description: 'test' } }) as CallToolResult)
}

/** Copies the mock LLM into the sandbox with create_file and starts it on loopback with bash_tool. */
export async function startMock (c: Client): Promise<void> {
  const script = await readFile(MOCK_SCRIPT, 'utf8')
  const created = await c.callTool({ name: 'create_file', arguments: { description: 'mock LLM', path: '/tmp/mock-llm.mjs', file_text: script } }) as CallToolResult
  if (created.isError === true) throw new Error(`create_file failed: ${textOf(created)}`)
  const out = await bash(c, `setsid nohup node /tmp/mock-llm.mjs --port ${MOCK_PORT} --log /tmp/mock-llm.jsonl > /tmp/mock-llm.out 2>&1 < /dev/null &
for i in $(seq 100); do curl -sf ${MOCK_URL}/health >/dev/null && { echo up; exit 0; }; sleep 0.2; done; cat /tmp/mock-llm.out; exit 1`)
  if (!out.startsWith('up')) throw new Error(`mock LLM did not start: ${out}`)
}

/** Requests the mock received (JSON lines), optionally only those with tools (the agent loop's calls). */
export async function mockRequests (c: Client): Promise<Array<Record<string, unknown>>> {
  const out = await bash(c, 'cat /tmp/mock-llm.jsonl')
  return out.split('\n').filter(l => l.startsWith('{')).map(l => JSON.parse(l) as Record<string, unknown>)
}

export interface SubAgentCall { result: CallToolResult, text: string, progress: Progress[], ms: number }

/** Calls sub_agent with a progress token and collects the progress notifications. */
export async function subAgent (c: Client, args: Record<string, unknown>, opts: { signal?: AbortSignal, timeoutMs?: number } = {}): Promise<SubAgentCall> {
  const progress: Progress[] = []
  const started = Date.now()
  const result = await c.callTool({ name: 'sub_agent', arguments: { description: 'test run', ...args } }, undefined, {
    onprogress: p => { progress.push(p) },
    timeout: opts.timeoutMs ?? 900_000,
    resetTimeoutOnProgress: true,
    ...(opts.signal !== undefined && { signal: opts.signal })
  }) as CallToolResult
  return { result, text: textOf(result), progress, ms: Date.now() - started }
}

/** The task text that scripts the mock: write `path` with `content`, then answer `final`. */
export const scripted = (path: string, content: string, final: string, extra = ''): string =>
  `Create the file ${path} as instructed.\nMOCK_WRITE ${path} ${content}\nMOCK_FINAL ${final}\n${extra}`

/** The session id of a result's Session ID line. */
export const sessionOf = (text: string): string | undefined => /\*\*Session ID:\*\* `([^`]+)`/.exec(text)?.[1]

/** Polls until `check` returns a value or the time is up. */
export async function waitFor<T> (check: () => Promise<T | undefined>, ms: number, stepMs = 500): Promise<T | undefined> {
  const until = Date.now() + ms
  while (Date.now() < until) {
    const v = await check()
    if (v !== undefined) return v
    await new Promise(resolve => setTimeout(resolve, stepMs))
  }
  return undefined
}
