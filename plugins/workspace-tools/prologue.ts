import type { CallToolResult } from '@modelcontextprotocol/server'
import type { ToolCallContext } from '../mcp-transport/types.js'
import { isOneOf } from '../../core/errors.js'
import { errorResult } from '../../core/tool-result.js'
import * as workspaceErrors from './errors.js'
import { createSandboxFiles, type SandboxFiles } from './sandbox-files.js'
import type { WorkspaceDeps, WorkspaceSettings } from './types.js'

export const textResult = (text: string): CallToolResult => ({ content: [{ type: 'text', text }] })

/** The call's sandbox handle: I/O helpers bound to the chat, bounded by COMMAND_TIMEOUT. */
export interface SandboxCall { files: SandboxFiles }

/**
 * Prologue of every tool (docs/contract.md#common-tool-rules): hold a lease for the whole call so the idle reaper never stops
 * the sandbox under it, ensure the sandbox within CONTAINER_CREATE_TIMEOUT, then run. Our own coded
 * failures become `Error: …` results here; SANDBOX_* errors are shaped the same way by the transport.
 */
export async function inSandbox<R = CallToolResult> (deps: WorkspaceDeps, settings: WorkspaceSettings, ctx: ToolCallContext,
  run: (call: SandboxCall) => Promise<R>): Promise<R | CallToolResult> {
  const release = deps.sandbox.lease(ctx.chatId)
  try {
    await deps.sandbox.ensure(ctx.chatId, { user: ctx.user, timeoutMs: settings.createTimeoutS * 1000 })
    const files = createSandboxFiles({ sandbox: deps.sandbox, chatId: ctx.chatId, signal: ctx.signal, timeoutS: settings.commandTimeoutS })
    return await run({ files })
  } catch (err) {
    if (isOneOf(err, workspaceErrors)) return errorResult((err as Error).message)
    throw err
  } finally {
    release()
  }
}
