import { randomBytes } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import type { SubagentCli } from '../../core/config.js'
import type { SandboxService } from '../sandbox/types.js'
import type { ToolCallContext } from '../mcp-transport/types.js'
import { EventStream, type RunOutcome } from './events.js'
import { startRunProgress } from './progress.js'
import { COLLECT_SCRIPT, RUN_SCRIPT, parseSetup, setupArgv, tarOf, type SandboxFile, type SetupStatus } from './setup.js'
import { SUB_AGENT_FAILED } from './errors.js'
import { missingCliHint } from './cli.js'
import type { Ending } from './format.js'

/*
 * One run in the chat's sandbox: prepare (one exec), run the CLI through runCommand (streamed event
 * stream, timeout with SIGTERM then SIGKILL of every process of the run, cancellation), then collect
 * the CLI's stderr and last-message file when the answer is missing. Nothing outlives the call: the
 * progress timer is stopped and the exec stream closed in every path.
 */

export interface RunDeps {
  sandbox: SandboxService
  log: FastifyBaseLogger
}

export interface RunPlan {
  cli: SubagentCli
  bin: string
  chatId: string
  runDir: string
  workingDirectory: string
  files: SandboxFile[]
  mcpNames: string[]
  env: Record<string, string>
  timeoutS: number
  killGraceMs: number
  progressIntervalS: number
  /** codex: the last-message file, then plain stdout and stderr, stand in for a missing answer (docs/contract.md#sub-agent-result). */
  textFallback: boolean
}

export interface RunResult {
  outcome: RunOutcome
  ending: Ending
  durationMs: number
  lastAction?: string
  /** stderr tail + non-JSON stdout, for runs without an answer. */
  errorOutput?: string
  cancelled: boolean
}

const SETUP_ERRORS: Record<Exclude<SetupStatus, 'ok'>, (plan: RunPlan, detail: string) => string> = {
  'cwd-missing': p => `working_directory ${p.workingDirectory} does not exist in the sandbox (it must be an absolute path of an existing directory)`,
  'cwd-denied': p => `working_directory ${p.workingDirectory} is not accessible to the sandbox user`,
  'cli-missing': p => `the sandbox image has no \`${p.bin}\` command (SUBAGENT_CLI=${p.cli}): ${missingCliHint(p.cli)}`,
  'setup-failed': (_p, d) => `could not prepare the run directory in the sandbox${d !== '' ? `: ${d}` : ''}`
}

/** Prepares the run directory; throws SUB_AGENT_FAILED with a message for the model when it cannot. */
export async function prepareRun (deps: RunDeps, plan: RunPlan, signal: AbortSignal): Promise<void> {
  const r = await deps.sandbox.exec(plan.chatId, setupArgv(plan.workingDirectory, plan.bin, plan.mcpNames), {
    stdin: await tarOf(plan.files), timeoutMs: 30_000, signal, maxBytes: 16 * 1024
  })
  const { status, detail } = parseSetup(r.stdout.toString('utf8'))
  if (status !== 'ok') throw new SUB_AGENT_FAILED(SETUP_ERRORS[status](plan, detail))
}

/** Runs the prepared CLI to its end, its timeout or the call's cancellation. */
export async function executeRun (deps: RunDeps, plan: RunPlan, ctx: Pick<ToolCallContext, 'progress' | 'wantsProgress' | 'signal'>): Promise<RunResult> {
  const progress = startRunProgress(ctx, { intervalS: plan.progressIntervalS, totalS: plan.timeoutS })
  const events = new EventStream(plan.cli, progress.action)
  const started = Date.now()
  let result
  try {
    result = await deps.sandbox.runCommand(plan.chatId, RUN_SCRIPT, {
      env: { ...plan.env, CUBICLE_SUB_AGENT_RUN: plan.runDir, CUBICLE_SUB_AGENT_CWD: plan.workingDirectory },
      timeoutMs: plan.timeoutS * 1000,
      killGraceMs: plan.killGraceMs,
      signal: ctx.signal,
      onOutput: text => events.push(text)
    })
  } finally {
    progress.stop()
  }
  events.end()
  const durationMs = Date.now() - started
  const outcome = events.reader.outcome()
  const ending: Ending = { exitCode: result.exitCode, timedOut: result.timedOut }
  const run: RunResult = { outcome, ending, durationMs, cancelled: result.cancelled }
  const last = progress.last()
  if (last !== undefined) run.lastAction = last
  if (result.cancelled) return run
  const needsText = outcome.text === undefined
  if (needsText || result.exitCode !== 0) {
    const collected = await collect(deps, plan).catch(err => { deps.log.warn({ err }, 'collecting the run\'s stderr failed'); return undefined })
    if (collected !== undefined) {
      const errorOutput = [events.rawText(), collected.stderr].filter(s => s.trim() !== '').join('\n')
      if (needsText && plan.textFallback) {
        // codex (docs/contract.md#sub-agent-result): the last completed message, else the last-message file, else stdout, then stderr;
        // plain output counts as text only when the CLI failed (on success it is just noise).
        const failed = result.exitCode !== 0 && result.exitCode !== null
        const fallback = collected.lastMessage.trim() !== '' ? collected.lastMessage : failed ? errorOutput : ''
        if (fallback.trim() !== '') outcome.text = fallback
      }
      if (errorOutput !== '') run.errorOutput = errorOutput
    }
  }
  return run
}

async function collect (deps: RunDeps, plan: RunPlan): Promise<{ stderr: string, lastMessage: string }> {
  const nonce = `cubicle-${randomBytes(12).toString('hex')}`
  const r = await deps.sandbox.exec(plan.chatId, ['/bin/sh', '-c', COLLECT_SCRIPT, 'cubicle-collect', plan.runDir, nonce], { timeoutMs: 10_000, maxBytes: 300 * 1024 })
  const out = r.stdout.toString('utf8')
  const at = out.indexOf(`\n${nonce}\n`)
  if (at === -1) return { stderr: out.slice(0, 4096), lastMessage: '' }
  return { stderr: out.slice(0, at), lastMessage: out.slice(at + nonce.length + 2) }
}
