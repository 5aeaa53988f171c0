import { randomBytes } from 'node:crypto'
import type { CallToolResult } from '@modelcontextprotocol/server'
import type { ToolCallContext, ToolDefinition } from '../mcp-transport/types.js'
import { SubAgentInput } from './schemas.js'
import { CLIS } from './cli.js'
import { SESSION_ID } from './json.js'
import { formatResult } from './format.js'
import { executeRun, prepareRun } from './run.js'
import { buildRunPlan, type PlanDeps, type PlanSettings } from './plan.js'
import type { RunRegistry } from './service.js'
import { errorResult } from '../../core/tool-result.js'
import { SUB_AGENT_FAILED } from './errors.js'

/*
 * The sub_agent tool (docs/contract.md#input-schemas, docs/contract.md#skills-and-sub-agent): argument checks, the per-chat cap, the prologue
 * (lease, ensure within CONTAINER_CREATE_TIMEOUT), then prepare → run → format. Our own failures are
 * `Error: …` results; SANDBOX_* errors are shaped the same way by the transport.
 */

export interface ToolSettings extends PlanSettings {
  createTimeoutS: number
  maxRunsPerChat: number
  maxOutputChars: number
}

/** Largest task accepted (UTF-8 bytes); bigger prompts belong in a file the task points to. */
export const MAX_TASK_BYTES = 1024 * 1024

const minutes = (s: number): string => s % 60 === 0 ? `${s / 60} minutes` : `${s} seconds`

export function toolDescription (s: ToolSettings): string {
  const { title, bin } = CLIS[s.cli]
  return `Delegate a long coding task to ${title} (\`${bin}\`, the SUBAGENT_CLI of this server), an autonomous coding agent that runs ` +
    'inside this chat\'s sandbox on the same files. It is slow and costly: use it only as a last resort, for code work that needs many ' +
    'build-run-fix iterations, never for what a few bash_tool, create_file or str_replace calls can do. Give it a complete, self-contained ' +
    'task (goal, files, constraints, how to verify): it does not see this conversation. ' +
    `It stops after ${minutes(s.timeoutS)} and after max_turns turns (default ${s.maxTurns}); progress is reported while it runs. ` +
    'The result gives the agent\'s answer, model, turns, cost, duration and a session ID; to continue that session with a follow-up ' +
    'task (keeping its context), call sub_agent again with that ID as resume_session_id and the same working_directory. ' +
    `At most ${s.maxRunsPerChat} run${s.maxRunsPerChat === 1 ? '' : 's'} per chat at a time.`
}

type Checked = { ok: true, task: string, cwd: string, resume?: string } | { ok: false, result: CallToolResult }

function checkArgs (args: SubAgentInput): Checked {
  const problems: string[] = []
  if (args.task.trim() === '') problems.push('task: must not be empty')
  if (Buffer.byteLength(args.task, 'utf8') > MAX_TASK_BYTES) problems.push(`task: at most ${MAX_TASK_BYTES} bytes; put long material in a file and name it in the task`)
  const cwd = (args.working_directory ?? '').trim() || '/home/assistant'
  if (!cwd.startsWith('/') || cwd.includes('\0') || cwd.length > 4096) problems.push('working_directory: must be an absolute path such as /home/assistant/project')
  const resume = (args.resume_session_id ?? '').trim()
  if (resume !== '' && !SESSION_ID.test(resume)) problems.push('resume_session_id: not a session ID (copy it from the Session ID line of an earlier result)')
  if (problems.length > 0) return { ok: false, result: errorResult(`invalid arguments: ${problems.join('; ')}`) }
  return { ok: true, task: args.task, cwd, ...(resume !== '' && { resume }) }
}

export function createSubAgentTool (deps: PlanDeps, settings: ToolSettings, runs: RunRegistry): ToolDefinition<typeof SubAgentInput> {
  return {
    name: 'sub_agent',
    order: 50,
    description: toolDescription(settings),
    inputSchema: SubAgentInput,
    annotations: { title: `Delegate to ${CLIS[settings.cli].title}`, readOnlyHint: false, destructiveHint: true, openWorldHint: true },
    handler: async (args, ctx) => {
      const checked = checkArgs(args)
      if (!checked.ok) return checked.result
      const model = deps.runtimeCli.resolveModel(args.model ?? '')
      if (!model.ok) return errorResult(model.error)
      const runId = `r-${Date.now().toString(36)}-${randomBytes(6).toString('hex')}`
      const release = runs.start(ctx.chatId, { runId, startedAt: Date.now(), description: args.description })
      if (release === undefined) {
        return errorResult(`a sub-agent is already running for this chat (at most ${settings.maxRunsPerChat} at a time); wait for its result or cancel that call, then retry`)
      }
      try {
        return await runInSandbox(deps, settings, ctx, { ...checked, runId, model, args })
      } catch (err) {
        if (err instanceof SUB_AGENT_FAILED) return errorResult(err.message)
        throw err
      } finally {
        release()
      }
    }
  }
}

interface CallInput {
  task: string
  cwd: string
  resume?: string
  runId: string
  model: { model: string, display: string }
  args: SubAgentInput
}

async function runInSandbox (deps: PlanDeps, settings: ToolSettings, ctx: ToolCallContext, c: CallInput): Promise<CallToolResult> {
  const leaseRelease = deps.sandbox.lease(ctx.chatId)
  try {
    await deps.sandbox.ensure(ctx.chatId, { user: ctx.user, timeoutMs: settings.createTimeoutS * 1000 })
    const maxTurns = (c.args.max_turns ?? 0) > 0 ? Math.min(c.args.max_turns ?? 0, 10_000) : settings.maxTurns
    const plan = await buildRunPlan(deps, settings, {
      chatId: ctx.chatId,
      user: ctx.user,
      runId: c.runId,
      task: c.task,
      description: c.args.description,
      workingDirectory: c.cwd,
      model: c.model.model,
      maxTurns,
      ...(c.resume !== undefined && { resumeSessionId: c.resume })
    })
    await prepareRun(deps, plan.run, ctx.signal)
    const run = await executeRun(deps, plan.run, ctx)
    if (run.cancelled) return { isError: true, content: [{ type: 'text', text: 'Error: cancelled' }] }
    const formatted = formatResult({
      displayModel: c.model.display,
      maxTurns,
      durationMs: run.durationMs,
      timeoutS: settings.timeoutS,
      outcome: run.outcome,
      ending: run.ending,
      maxChars: settings.maxOutputChars,
      ...(run.lastAction !== undefined && { lastAction: run.lastAction }),
      ...(run.errorOutput !== undefined && { errorOutput: run.errorOutput }),
      secrets: plan.secrets
    })
    ctx.log.info({ chatId: ctx.chatId, runId: c.runId, exitCode: run.ending.exitCode, timedOut: run.ending.timedOut, ms: run.durationMs, isError: formatted.isError }, 'sub-agent run ended')
    return { ...(formatted.isError && { isError: true }), content: [{ type: 'text', text: formatted.text }] }
  } finally {
    leaseRelease()
  }
}
