/*
 * The app the workspace-tools integration tests run: the real transport, capabilities, Docker
 * sandbox driver and our tools, over real HTTP with the official SDK client (test/integration/tools-*, test/serial/tools-*).
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import type { Test } from 'tap'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import type { FastifyInstance } from 'fastify'
import type { Entry } from '../../../core/app.js'
import { entries } from '../../../fastify.config.js'
import type { AppConfig } from '../../../core/config.js'
import { listen } from '../../helper.js'
import { connect } from '../../fixtures/mcp-probe.js'
import { removeByPrefix, TEST_IMAGE } from '../../integration/docker.js'

/** The real transport, capabilities, Docker driver and tools, with the manifest's own options. */
export function toolsManifest (config: AppConfig): Entry[] {
  return entries(config, ['chat-storage', 'mcp-transport', 'capabilities', 'sandbox-docker', 'sandbox', 'workspace-tools'])
}

export interface ToolsApp { app: FastifyInstance, url: string, dataDir: string, prefix: string }

/**
 * Boots the tools app with a unique SANDBOX_PREFIX and a temp DATA_DIR; on teardown the app closes,
 * then every container, volume and network of the prefix and the data dir are removed.
 */
export async function toolsApp (t: Test, env: Record<string, string> = {}): Promise<ToolsApp> {
  const prefix = `t-${randomBytes(4).toString('hex')}`
  const dataDir = await mkdtemp(join(tmpdir(), 'wt-data-'))
  t.teardown(async () => {
    await removeByPrefix(prefix)
    await rm(dataDir, { recursive: true, force: true })
  })
  const { app, url } = await listen(t, { SANDBOX_PREFIX: prefix, DATA_DIR: dataDir, DOCKER_IMAGE: TEST_IMAGE, ...env }, toolsManifest)
  return { app, url, dataDir, prefix }
}

export async function client (t: Test, url: string, chatId: string): Promise<Client> {
  return await connect(t, url, { 'X-Chat-Id': chatId })
}

export const textOf = (r: CallToolResult | Record<string, unknown>): string => {
  const content = (r as CallToolResult).content
  const block = content?.[0]
  return block?.type === 'text' ? block.text : ''
}

export async function bash (c: Client, command: string, description = 'test'): Promise<CallToolResult> {
  return await c.callTool({ name: 'bash_tool', arguments: { command, description } }) as CallToolResult
}
