/*
 * Shared setup of the library-skill tests (docs/contract.md#skills): a server with the Docker sandbox and the
 * workspace tools over real HTTP, one chat, its host-side uploads/outputs folders, and the commands
 * a SKILL.md shows, taken from the file inside the sandbox so the tests run exactly what it says.
 */
import { randomBytes } from 'node:crypto'
import { mkdir, mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { chatPaths } from '../../core/chat-paths.js'
import { entries } from '../../fastify.config.js'
import { connect, textOf } from '../fixtures/mcp-probe.js'
import { listen, TEST_API_KEY } from '../helper.js'
import { cleanupPrefix, TEST_IMAGE } from './docker.js'

export interface SkillChat {
  client: Client
  /** Runs a bash_tool command; returns its text (stdout, stderr and the exit-code line of the tool). */
  sh: (command: string) => Promise<string>
  /** Calls any workspace tool (view, create_file, str_replace). */
  tool: (name: string, args: Record<string, unknown>) => Promise<CallToolResult>
  /** The chat's uploads and outputs folders on the host (bind-mounted into the sandbox). */
  uploads: string
  outputs: string
}

export async function skillChat (t: Test, label: string): Promise<SkillChat> {
  const prefix = `t-${randomBytes(3).toString('hex')}`
  await cleanupPrefix(t, prefix)
  const dataDir = await mkdtemp(join(tmpdir(), `${prefix}-data-`))
  const { url } = await listen(t, {
    MCP_API_KEY: TEST_API_KEY,
    DATA_DIR: dataDir,
    SANDBOX_PREFIX: prefix,
    DOCKER_IMAGE: TEST_IMAGE,
    CONTAINER_MEM_LIMIT: '1g',
    COMMAND_TIMEOUT: '240',
    ENABLE_NETWORK: 'false'
  }, config => entries(config, ['chat-storage', 'mcp-transport', 'capabilities', 'sandbox-docker', 'sandbox', 'workspace-tools']))
  const chat = `${label}-${randomBytes(3).toString('hex')}`
  const client = await connect(t, url, { Authorization: `Bearer ${TEST_API_KEY}`, 'X-Chat-Id': chat })
  const tool = async (name: string, args: Record<string, unknown>): Promise<CallToolResult> =>
    await client.callTool({ name, arguments: args }, undefined, { timeout: 300_000 }) as CallToolResult
  const sh = async (command: string): Promise<string> => textOf(await tool('bash_tool', { command, description: `${label} skill test` }))
  const paths = chatPaths(dataDir, chat)
  await mkdir(paths.uploads, { recursive: true })
  return { client, sh, tool, uploads: paths.uploads, outputs: paths.outputs }
}

/** Every line of the SKILL.md's ```bash blocks that starts with `start`, in order. */
export function commandsOf (skillMd: string, start: string): string[] {
  const out: string[] = []
  for (const block of skillMd.matchAll(/```bash\n([\s\S]*?)```/g)) {
    for (const line of (block[1] ?? '').split('\n')) if (line.startsWith(start)) out.push(line.trim())
  }
  return out
}

/** The one command of the SKILL.md that starts with `start` and contains every `needle`. */
export function commandOf (t: Test, skillMd: string, start: string, ...needles: string[]): string {
  const found = commandsOf(skillMd, start).filter(c => needles.every(n => c.includes(n)))
  t.equal(found.length >= 1, true, `the SKILL.md shows \`${start} … ${needles.join(' … ')}\``)
  return found[0] ?? 'false'
}

/** The first image block of a tool result, decoded. */
export function imageOf (result: CallToolResult): { mimeType: string, bytes: Buffer } | undefined {
  const image = result.content.find(c => c.type === 'image')
  return image?.type === 'image' ? { mimeType: image.mimeType, bytes: Buffer.from(image.data, 'base64') } : undefined
}
