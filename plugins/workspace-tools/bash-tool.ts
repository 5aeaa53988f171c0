import type { Static } from 'typebox'
import type { CallToolResult, JSONObject } from '@modelcontextprotocol/server'
import type { ToolCallContext, ToolDefinition, ToolInputRequired } from '../mcp-transport/types.js'
import { BashToolInput } from './schemas.js'
import type { WorkspaceDeps, WorkspaceSettings } from './types.js'
import { inSandbox } from './prologue.js'
import { createOutputCapper } from './output-capper.js'
import { appendNotes, appendOutputLinks, bashResult, progressMessage, resultNotes } from './bash-result.js'
import { createOutputsTracker, type OutputsAccess } from './outputs-snapshot.js'
import { newRequestToken, REQUEST_TOKEN_ENV, takeRequests, type CommandRequest } from './command-requests.js'

/** The answer to a program's request (docs/contract.md#command-requests), for the model, or the handler's question to the client. */
async function answer (deps: WorkspaceDeps, ctx: ToolCallContext, request: CommandRequest): Promise<string | ToolInputRequired> {
  const handler = deps.requests?.get(request.kind)
  if (handler === undefined) return `(this server does not handle \`${request.kind}\` requests)`
  try {
    return await handler(ctx, request.text)
  } catch (err) {
    ctx.log.warn({ err, kind: request.kind }, 'a command request failed')
    return `(the \`${request.kind}\` request could not be handled: ${err instanceof Error ? err.message.slice(0, 200) : 'error'})`
  }
}

/**
 * What a bash_tool call keeps while a command request asks the client first (2026-07-28, the
 * multi-round-trip pattern): the request, the result text without its answer, the handler's own state.
 * The transport seals it; the retried call (same arguments) resumes here instead of running the command again.
 */
interface PendingRequest { request: CommandRequest, text: string, handler: JSONObject }

const pendingOf = (state: JSONObject | undefined): PendingRequest | undefined => {
  const pending = state?.commandRequest as Partial<PendingRequest> | undefined
  return pending !== undefined && typeof pending.text === 'string' && typeof pending.request?.kind === 'string' && typeof pending.request.text === 'string' &&
    pending.handler !== null && typeof pending.handler === 'object'
    ? pending as PendingRequest
    : undefined
}

/** The result once the request is answered, or the handler's next question with the text kept. */
function finish (text: string, request: CommandRequest, answered: string | ToolInputRequired, limit: number): CallToolResult | ToolInputRequired {
  if (typeof answered !== 'string') {
    const pending: PendingRequest = { request, text, handler: answered.inputRequired.state }
    return { inputRequired: { requests: answered.inputRequired.requests, state: { commandRequest: pending as unknown as JSONObject } } }
  }
  return { content: [{ type: 'text', text: appendNotes(text, [answered], limit) }] }
}

/** docs/contract.md#bash_tool: the whole result stays ≤ 32,000 chars; room is left for the transport's lenient note. */
const RESULT_LIMIT = 32_000
const NOTE_RESERVE = 600
/** The first progress notification comes early so clients show liveness at once (the contract's interval is 15 s). */
export const FIRST_PROGRESS_MS = 1000
const EXEC_ENV = { PAGER: 'cat', GIT_PAGER: 'cat', DEBIAN_FRONTEND: 'noninteractive' }

/**
 * Sends progress at ~1 s, then at every multiple of the interval; `progress` is the elapsed whole
 * seconds and never repeats. Returns the stop function.
 */
export function startProgress (ctx: Pick<ToolCallContext, 'progress'>, intervalS: number, totalS: number,
  message: (elapsedS: number) => string, firstMs = FIRST_PROGRESS_MS): () => void {
  const started = Date.now()
  const intervalMs = intervalS * 1000
  let last = 0
  let stopped = false
  let timer: NodeJS.Timeout | undefined
  const schedule = (): void => {
    const elapsedMs = Date.now() - started
    const next = (Math.floor(elapsedMs / intervalMs) + 1) * intervalMs
    timer = setTimeout(tick, next - elapsedMs + 5)
    timer.unref()
  }
  const tick = (): void => {
    if (stopped) return
    const elapsed = Math.floor((Date.now() - started) / 1000)
    if (elapsed > last) {
      last = elapsed
      ctx.progress(elapsed, totalS, message(elapsed)).catch(() => {})
    }
    schedule()
  }
  timer = setTimeout(tick, firstMs)
  timer.unref()
  return () => { stopped = true; clearTimeout(timer) }
}

export function createBashTool (deps: WorkspaceDeps, settings: WorkspaceSettings): ToolDefinition<typeof BashToolInput> {
  const T = settings.commandTimeoutS
  const limit = Math.max(RESULT_LIMIT, settings.maxOutputChars + 2000) - NOTE_RESERVE
  const tracker = createOutputsTracker()
  return {
    name: 'bash_tool',
    order: 10,
    description: 'Run a bash command in this chat\'s own Linux sandbox, as user assistant in /home/assistant ' +
      `(files there persist between calls). stdout and stderr come back together. Commands stop after ${T} seconds ` +
      'together with everything they started: run servers and longer jobs with the job command ' +
      '(job start --name web -- npm run dev; then job list for state and listening ports, job logs web, job stop web; ' +
      `/mnt/skills/public/job/SKILL.md). Output over ${settings.maxOutputChars} characters keeps only its beginning and end, so filter ` +
      'it with head, tail or grep. Exit status 1 of grep, rg, find, diff and test is reported as information, not ' +
      'as a failure. Files written to /mnt/user-data/outputs are published, and their links are listed after the output.',
    inputSchema: BashToolInput,
    annotations: { title: 'Run a command', readOnlyHint: false, destructiveHint: true, openWorldHint: true },
    handler: async (args, ctx) => {
      // A retried 2026-07-28 call after the client asked the human: the command ran already; answer its request.
      const pending = pendingOf(ctx.inputRound?.resumed?.state)
      if (pending !== undefined) {
        const resumed = ctx.inputRound?.resumed
        const answerCtx: ToolCallContext = { ...ctx, inputRound: { url: ctx.inputRound?.url === true, resumed: { state: pending.handler, responses: resumed?.responses ?? {} } } }
        return finish(pending.text, pending.request, await answer(deps, answerCtx, pending.request), limit)
      }
      return await run(args, ctx)
    }
  }

  async function run (args: Static<typeof BashToolInput>, ctx: ToolCallContext): Promise<CallToolResult | ToolInputRequired> {
    return await inSandbox(deps, settings, ctx, async (): Promise<CallToolResult | ToolInputRequired> => {
      const outputs: OutputsAccess = {
        walk: opts => deps.storage.walk(ctx.chatId, 'outputs', opts),
        clock: async () => await deps.storage.changeClock(ctx.chatId, 'outputs')
      }
      const before = await tracker.before(ctx.chatId, outputs)
      let capper = createOutputCapper(settings.maxOutputChars)
      const token = newRequestToken()
      const stop = ctx.wantsProgress
        ? startProgress(ctx, settings.progressIntervalS, T, s => progressMessage(args.description, args.command, s, capper.recent(2000)))
        : () => {}
      let outcome
      try {
        outcome = await deps.sandbox.runCommand(ctx.chatId, args.command, {
          env: { ...EXEC_ENV, [REQUEST_TOKEN_ENV]: token },
          timeoutMs: T * 1000,
          signal: ctx.signal,
          // What the notes want read with the exit (the ports plugin's listening sockets): no question after the command.
          ...(deps.noteNeeds?.listening !== undefined && { listening: deps.noteNeeds.listening }),
          onOutput: text => capper.push(text),
          // The first attempt never started (saturated sandbox, restarted): its output is only the engine's complaint.
          onReset: () => { capper = createOutputCapper(settings.maxOutputChars) }
        })
      } finally {
        stop()
      }
      const taken = takeRequests(capper.finish().text, token)
      const result = bashResult({
        command: args.command, exitCode: outcome.exitCode, timedOut: outcome.timedOut, output: taken.output, timeoutSeconds: T, notices: outcome.notices, limit
      })
      if (result.isError === true) return result
      const requested = taken.request === undefined ? [] : [await answer(deps, ctx, taken.request)]
      const [changed, later] = await Promise.all([tracker.after(ctx.chatId, before, outputs), resultNotes(deps.notes ?? [], ctx.chatId, outcome.listening === undefined ? {} : { listening: outcome.listening })])
      const links = changed.map((rel): [string, string] => [rel, deps.links.fileUrl(ctx.chatId, rel)])
      const block = result.content[0]
      const [asked] = requested
      if (asked !== undefined && typeof asked !== 'string' && taken.request !== undefined && block?.type === 'text') {
        return finish(appendNotes(appendOutputLinks(block.text, links, limit), later, limit), taken.request, asked, limit)
      }
      const notes = [...requested.filter(note => typeof note === 'string'), ...later]
      if ((links.length === 0 && notes.length === 0) || block?.type !== 'text') return result
      return { ...result, content: [{ type: 'text', text: appendNotes(appendOutputLinks(block.text, links, limit), notes, limit) }] }
    })
  }
}
