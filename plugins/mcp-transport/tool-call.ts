import { ProtocolErrorCode, type CallToolResult, type RequestId } from '@modelcontextprotocol/server'
import { CHAT_ID_HINT } from '../../core/identity.js'
import { errorResult } from '../../core/tool-result.js'
import { protocolError } from './errors.js'
import type { CompiledTool, RegistryInternals } from './registry.js'
import { validateArguments } from './registry.js'
import type { ElicitationAction, InputRound, McpRequestContext, ToolCallContext, ToolCallOutcome, ToolInputRequired, UrlElicitation } from './types.js'

/** Sends `elicitation/create` in URL mode to the client of this call; the transport provides it when it can (routes.ts). */
export type UrlElicitor = (request: UrlElicitation, opts: { timeoutMs: number, signal: AbortSignal }) => Promise<ElicitationAction>

export const LENIENT_NOTE = '\n\n---\nNote: this request carried no chat id (X-Chat-Id or X-OpenWebUI-Chat-Id), so it ran in the shared ' +
  '`default` sandbox that every such caller uses: other chats, and other users, see and change the same files. To give each chat ' +
  `its own computer, ${CHAT_ID_HINT}. An operator can also set SINGLE_USER_MODE=true (one shared sandbox, no note) or ` +
  'SINGLE_USER_MODE=false (the chat id becomes required).'

/** The strict-mode (SINGLE_USER_MODE=false) answer to a tool call without a chat id. */
export const MISSING_CHAT_TEXT = `X-Chat-Id header is required (SINGLE_USER_MODE=false). To use this chat's own sandbox, ${CHAT_ID_HINT}. Nothing was run.`

/** A tool's answer that asks the client for input first (2026-07-28), as opposed to a result. */
export const isInputRequired = (result: CallToolResult | ToolInputRequired): result is ToolInputRequired =>
  (result as Partial<ToolInputRequired>).inputRequired !== undefined

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

export const SHUTDOWN_TEXT = 'the server is shutting down (a restart or an update) and stopped this call before it finished. ' +
  'Files written so far are kept and the sandbox keeps running; run the call again in a moment.'

export interface ToolRunner extends CallTracker {
  /**
   * Shutdown (preClose): new calls are answered with SHUTDOWN_TEXT; running calls get `drainMs` to
   * finish, then are cancelled and answered with SHUTDOWN_TEXT once their tool stopped, or after
   * `cancelWaitMs` at most. Resolves when every call has been answered.
   */
  drain (drainMs: number, cancelWaitMs: number): Promise<void>
  run (input: {
    ctx: McpRequestContext
    name: string
    args: Record<string, unknown>
    requestId: RequestId
    progressToken?: string | number
    signal: AbortSignal
    sendProgress: (params: { progressToken: string | number, progress: number, total?: number, message: string }) => Promise<void>
    elicitUrl?: UrlElicitor
    /** 2026-07-28 calls: what the client allows and what a retried call brings back (server-factory.ts). */
    inputRound?: InputRound
  }): Promise<CallToolResult | ToolInputRequired | undefined>
}

/**
 * The one wrapper around every tool handler: chat resolution (docs/contract.md#single-user-mode), argument validation (docs/contract.md#common-tool-rules),
 * per-chat concurrency cap (item 10), cancellation (item 9), error shaping (item 6), lenient note (item 11).
 * Resolves undefined when the call was cancelled: no result is sent.
 */
/** One running call: its abort switch and, once a shutdown stopped it, the answer that replaces its result. */
interface RunningCall {
  controller: AbortController
  settled: Promise<unknown>
  stop?: (cancelWaitMs: number) => void
}

export function createToolRunner (registry: RegistryInternals, opts: { maxCallsPerChat: number, onLenient: (ctx: McpRequestContext) => void }): ToolRunner {
  const running = new Map<string, RunningCall>()
  const perChat = new Map<string, number>()
  const callKey = (chatId: string, id: RequestId): string => `${chatId}\u0000${typeof id}:${String(id)}`
  let closing = false

  /** Checks that refuse a call before its handler runs; returns the refusal or the validated input. */
  function admit (ctx: McpRequestContext, tool: CompiledTool, args: Record<string, unknown>): CallToolResult | { chatId: string, value: Record<string, unknown> } {
    const { resolution } = ctx
    if (closing) return errorResult(SHUTDOWN_TEXT)
    if (resolution.kind === 'missing') {
      return errorResult(MISSING_CHAT_TEXT)
    }
    if (resolution.kind === 'invalid') return errorResult(`invalid chat id: it ${resolution.reason}. Nothing was run.`)
    const checked = validateArguments(tool, args)
    if (!checked.ok) return errorResult(`invalid arguments: ${checked.problems.join('; ')}`)
    if ((perChat.get(resolution.chatId) ?? 0) >= opts.maxCallsPerChat) return errorResult('too many concurrent calls for this chat; wait for one to finish and retry')
    return { chatId: resolution.chatId, value: checked.value }
  }

  /** The result transforms of the client's extensions (MCP Apps); a failing one leaves the result as it was. */
  async function extend (tool: string, args: Record<string, unknown>, result: CallToolResult, ctx: ToolCallContext): Promise<CallToolResult> {
    let shaped = result
    for (const transform of registry.resultTransforms(ctx.clientExtensions)) {
      try { shaped = await transform({ tool, args, result: shaped, ctx }) } catch (err) { ctx.log.error({ err }, 'tool result transform failed; result left as it was') }
    }
    return shaped
  }

  return {
    cancel (chatId, requestId) {
      const call = running.get(callKey(chatId, requestId))
      call?.controller.abort()
      return call !== undefined
    },
    async drain (drainMs, cancelWaitMs) {
      closing = true
      const all = (): Promise<unknown> => Promise.allSettled([...running.values()].map(async c => await c.settled))
      let timer: NodeJS.Timeout | undefined
      await Promise.race([all(), new Promise<void>(resolve => { timer = setTimeout(resolve, drainMs) })])
      clearTimeout(timer)
      for (const call of running.values()) call.stop?.(cancelWaitMs)
      await all()
    },
    async run ({ ctx, name, args, requestId, progressToken, signal, sendProgress, elicitUrl, inputRound }) {
      const tool = registry.tool(name, ctx.clientExtensions)
      if (tool === undefined) throw protocolError(ProtocolErrorCode.InvalidParams, `Unknown tool: ${name}`)
      const started = performance.now()
      const report = (outcome: ToolCallOutcome): void => {
        registry.toolCallEnded({ tool: name, outcome, durationMs: performance.now() - started }, ctx.log)
      }
      const admitted = admit(ctx, tool, args)
      if ('content' in admitted) { report('rejected'); return admitted }
      const { chatId } = admitted
      perChat.set(chatId, (perChat.get(chatId) ?? 0) + 1)
      const controller = new AbortController()
      const key = callKey(chatId, requestId)
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
        },
        ...(elicitUrl !== undefined && { elicitUrl: async (request, timeoutMs) => await elicitUrl(request, { timeoutMs, signal: controller.signal }) }),
        ...(inputRound !== undefined && { inputRound })
      }
      // A shutdown (drain) stops the call: abort the tool, then answer once it stopped or the wait ran out.
      let stopped: ((value: 'shutdown') => void) | undefined
      let stoppedByShutdown = false
      const shutdown = new Promise<'shutdown'>(resolve => { stopped = resolve })
      const handled = tool.def.handler(admitted.value, callCtx).catch((err: unknown) => toolError(err, ctx))
      const settled: Promise<CallToolResult | ToolInputRequired | 'shutdown'> = Promise.race([handled, shutdown])
      const call: RunningCall = {
        controller,
        settled,
        stop (cancelWaitMs) {
          stoppedByShutdown = true
          controller.abort()
          const timer = setTimeout(() => stopped?.('shutdown'), cancelWaitMs)
          void handled.finally(() => { clearTimeout(timer); stopped?.('shutdown') })
        }
      }
      running.set(key, call)
      try {
        const result = await settled
        if (result === 'shutdown' || stoppedByShutdown) { report('shutdown'); return errorResult(SHUTDOWN_TEXT) }
        if (controller.signal.aborted) { report('cancelled'); return undefined }
        // Asking the client first (2026-07-28): the transport sends it as input_required, with the state sealed.
        if (isInputRequired(result)) { report('ok'); return inputRound?.url === true ? result : errorResult('this client cannot be asked for input') }
        report(result.isError === true ? 'error' : 'ok')
        const shaped = result.isError === true ? result : await extend(name, admitted.value, result, callCtx)
        if (ctx.resolution.kind === 'chat' && ctx.resolution.lenientNote) {
          opts.onLenient(ctx)
          return appendNote(shaped)
        }
        return shaped
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
