import type { CallToolResult } from '@modelcontextprotocol/server'
import type { TObject } from 'typebox'
import type { CommandOptions, CommandResult, ExecOptions, ExecResult, SandboxService } from '../../../plugins/sandbox/types.js'
import type { LinkService } from '../../../plugins/capabilities/types.js'
import type { ToolCallContext, ToolDefinition } from '../../../plugins/mcp-transport/types.js'
import { createWorkspaceTools } from '../../../plugins/workspace-tools/service.js'
import type { WorkspaceDeps } from '../../../plugins/workspace-tools/types.js'
import { walkTree, type WalkOptions } from '../../../core/tree-walk.js'

export interface ExecCall { argv: string[], opts?: ExecOptions }

/** A SandboxService that records calls and answers exec/runCommand through the given functions. */
export function fakeSandbox (answer: {
  exec?: (argv: string[], opts?: ExecOptions) => Partial<ExecResult> | Promise<Partial<ExecResult>>
  run?: (command: string, opts: CommandOptions) => Promise<CommandResult>
  ensure?: () => Promise<void>
} = {}) {
  const log: string[] = []
  const execs: ExecCall[] = []
  let leases = 0
  const sandbox: SandboxService = {
    async ensure (chatId, opts) {
      log.push(`ensure ${chatId} ${opts?.timeoutMs ?? '-'}`)
      await answer.ensure?.()
      return { chatId, chatKey: 'k', sandboxId: 'c', name: 'n', createdAt: '' }
    },
    async status () { return { state: 'running', metaExists: true } },
    async exec (chatId, argv, opts) {
      execs.push({ argv, opts })
      log.push(`exec ${argv[0] ?? ''}`)
      const r = await (answer.exec?.(argv, opts) ?? {})
      return { exitCode: 0, stdout: Buffer.alloc(0), stderr: Buffer.alloc(0), truncated: false, timedOut: false, cancelled: false, ...r }
    },
    async runCommand (chatId, command, opts) {
      log.push(`run ${command}`)
      if (answer.run === undefined) return { exitCode: 0, timedOut: false, cancelled: false }
      return await answer.run(command, opts)
    },
    async putFile () { throw new Error('not used') },
    lease (chatId) {
      leases++
      log.push(`lease ${chatId}`)
      return () => { leases--; log.push(`release ${chatId}`) }
    },
    touch () {},
    async stop () {},
    async remove () {},
    onEnsure () {}
  }
  return { sandbox, log, execs, leases: () => leases }
}

export const fakeLinks: LinkService = {
  token: () => undefined,
  verify: () => 'forbidden',
  filesBase: chatId => `http://cubicle.test/files/${chatId}`,
  fileUrl: (chatId, rel) => `http://cubicle.test/files/${chatId}/${rel.split('/').map(encodeURIComponent).join('/')}`,
  filePath: (chatId, rel) => `/files/${chatId}/${rel}`,
  archiveUrl: chatId => `http://cubicle.test/files/${chatId}/archive`,
  previewUrl: chatId => `http://cubicle.test/preview/${chatId}`,
  publicBaseUrl: 'http://cubicle.test'
}

export interface ProgressCall { progress: number, total: number | undefined, message: string, at: number }

export function fakeContext (opts: { wantsProgress?: boolean } = {}) {
  const progress: ProgressCall[] = []
  const started = Date.now()
  const controller = new AbortController()
  const ctx = {
    requestId: 'req-1',
    resolution: { kind: 'ok', chatId: 'chat-a', lenientNote: false },
    user: { emailRejected: false, mcpServers: [], credentials: {} },
    headers: {},
    log: { error () {}, warn () {}, info () {}, debug () {} },
    chatId: 'chat-a',
    signal: controller.signal,
    wantsProgress: opts.wantsProgress ?? false,
    async progress (p: number, total: number | undefined, message: string) { progress.push({ progress: p, total, message, at: Date.now() - started }) }
  } as unknown as ToolCallContext
  return { ctx, progress, controller }
}

export const SETTINGS = { commandTimeoutS: 120, createTimeoutS: 60, maxOutputChars: 30000, progressIntervalS: 15 }

/**
 * The four tools built on a fake sandbox; `call(name, args)` runs one through prepare + handler. The outputs
 * are `outputsDir`, walked, without a change clock (every call walks before its command) unless `storage` is given.
 */
export function tools (sandbox: SandboxService, outputsDir = '/nonexistent-outputs', settings = SETTINGS,
  storage: WorkspaceDeps['storage'] = { walk: (_chatId: string, _area: string, opts: WalkOptions = {}) => walkTree(outputsDir, opts), changeClock: async () => undefined }) {
  const defs = createWorkspaceTools({ sandbox, links: fakeLinks, storage }, settings)
  const byName = new Map(defs.map(d => [d.name, d as ToolDefinition<TObject>]))
  return {
    defs,
    async call (name: string, args: Record<string, unknown>, ctx = fakeContext().ctx): Promise<CallToolResult> {
      const def = byName.get(name)
      if (def === undefined) throw new Error(`no tool ${name}`)
      const prepared = def.prepare?.(args) ?? args
      const result = await def.handler(prepared as never, ctx)
      if ('inputRequired' in result && result.inputRequired !== undefined) throw new Error(`${name} asked for input: ${JSON.stringify(result)}`)
      return result as CallToolResult
    }
  }
}

export const textOf = (r: CallToolResult): string => {
  const block = r.content[0]
  return block?.type === 'text' ? block.text : ''
}
