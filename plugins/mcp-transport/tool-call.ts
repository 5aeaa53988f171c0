import { ErrorCode, type CallToolResult, type RequestId } from '@modelcontextprotocol/sdk/types.js'
import { protocolError } from './errors.js'
import type { RegistryInternals } from './registry.js'
import { validateArguments } from './registry.js'
import type { McpRequestContext, ToolCallContext } from './types.js'

export const LENIENT_NOTE = '\n\n---\nNote: this request carried no X-Chat-Id header, so it ran in the shared `default` sandbox that every ' +
  'such caller uses. To give each chat its own computer, have the client send X-Chat-Id (or X-OpenWebUI-Chat-Id); ' +
  'an operator can also set SINGLE_USER_MODE=true (one shared sandbox, no note) or SINGLE_USER_MODE=false (the header becomes required).'

const MAX_ERROR_CHARS = 2000

export function errorResult (text: string): CallToolResult {
  const body = text.startsWith('Error:') ? text : `Error: ${text}`
  return { isError: true, content: [{ type: 'text', text: body.length > MAX_ERROR_CHARS ? `${body.slice(0, MAX_ERROR_CHARS - 1)}…` : body }] }
}

interface ExposedError { message: string, expose?: boolean, code?: unknown, statusCode?: number, name?: string }

/** Errors written for clients (coded FastifyErrors below 500, or `expose`) are shown; anything else is logged and cited by ref. */
function toolError (err: unknown, ctx: McpRequestContext): CallToolResult {
  const e = err as ExposedError
  const coded = typeof e?.code === 'string' && e.name === 'FastifyError' && e.statusCode !== 500
  if (e !== null && typeof e === 'object' && (e.expose === true || coded)) return errorResult(e.message)
  ctx.log.error({ err }, 'tool failed unexpectedly')
  return errorResult(`internal error (ref ${ctx.requestId})`)
}

function appendNote (result: CallToolResult): CallToolResult {
  const content = [...result.content]
  for (let i = content.length - 1; i >= 0; i--) {
    const block = content[i]
    if (block?.type === 'text') {
      content[i] = { ...block, text: block.text + LENIENT_NOTE }
      return { ...result, content }
    }
  }
  return { ...result, content: [...content, { type: 'text', text: LENIENT_NOTE.trimStart() }] }
}

export interface CallTracker {
  /** Aborts the running call with that JSON-RPC id in that chat; false when none is running. */
  cancel (chatId: string, requestId: RequestId): boolean
}

export interface ToolRunner extends CallTracker {
  run (input: {
    ctx: McpRequestContext
    name: string
    args: Record<string, unknown>
    requestId: RequestId
    progressToken?: string | number
    signal: AbortSignal
    sendProgress: (params: { progressToken: string | number, progress: number, total?: number, message: string }) => Promise<void>
  }): Promise<CallToolResult | undefined>
}

/**
 * The one wrapper around every tool handler: chat resolution (§1.4), argument validation (§3.1 item 7),
 * per-chat concurrency cap (item 10), cancellation (item 9), error shaping (item 6), lenient note (item 11).
 * Resolves undefined when the call was cancelled: no result is sent.
 */
export function createToolRunner (registry: RegistryInternals, opts: { maxCallsPerChat: number, onLenient: (ctx: McpRequestContext) => void }): ToolRunner {
  const running = new Map<string, AbortController>()
  const perChat = new Map<string, number>()
  const callKey = (chatId: string, id: RequestId): string => `${chatId}\u0000${typeof id}:${String(id)}`

  return {
    cancel (chatId, requestId) {
      const controller = running.get(callKey(chatId, requestId))
      controller?.abort()
      return controller !== undefined
    },
    async run ({ ctx, name, args, requestId, progressToken, signal, sendProgress }) {
      const tool = registry.tool(name)
      if (tool === undefined) throw protocolError(ErrorCode.InvalidParams, `Unknown tool: ${name}`)
      const { resolution } = ctx
      if (resolution.kind === 'missing') {
        return errorResult('X-Chat-Id header is required (SINGLE_USER_MODE=false). Send X-Chat-Id (or X-OpenWebUI-Chat-Id) with an id that names this chat; nothing was run.')
      }
      if (resolution.kind === 'invalid') return errorResult(`invalid chat id: it ${resolution.reason}. Nothing was run.`)
      const checked = validateArguments(tool, args)
      if (!checked.ok) return errorResult(`invalid arguments: ${checked.problems.join('; ')}`)

      const chatId = resolution.chatId
      const active = perChat.get(chatId) ?? 0
      if (active >= opts.maxCallsPerChat) return errorResult('too many concurrent calls for this chat; wait for one to finish and retry')
      perChat.set(chatId, active + 1)
      const controller = new AbortController()
      const key = callKey(chatId, requestId)
      running.set(key, controller)
      const onAbort = (): void => controller.abort()
      signal.addEventListener('abort', onAbort, { once: true })
      const callCtx: ToolCallContext = {
        ...ctx,
        chatId,
        signal: controller.signal,
        wantsProgress: progressToken !== undefined,
        async progress (progress, total, message) {
          if (progressToken === undefined || controller.signal.aborted) return
          await sendProgress({ progressToken, progress, ...(total !== undefined && { total }), message }).catch(() => {})
        }
      }
      try {
        let result: CallToolResult
        try {
          result = await tool.def.handler(checked.value, callCtx)
        } catch (err) {
          result = toolError(err, ctx)
        }
        if (controller.signal.aborted) return undefined
        if (resolution.lenientNote) {
          opts.onLenient(ctx)
          result = appendNote(result)
        }
        return result
      } finally {
        signal.removeEventListener('abort', onAbort)
        running.delete(key)
        const left = (perChat.get(chatId) ?? 1) - 1
        if (left === 0) perChat.delete(chatId)
        else perChat.set(chatId, left)
      }
    }
  }
}
