import type { FastifyBaseLogger } from 'fastify'
import type { SubagentCli } from '../../core/config.js'
import type { RequestUser } from '../../core/identity.js'
import type { LinkService } from '../capabilities/types.js'
import type { RuntimeCliService } from '../runtime-cli/types.js'
import type { SandboxService } from '../sandbox/types.js'
import { buildInvocation, type RunSpec } from './argv.js'
import { CLIS } from './cli.js'
import {
  anthropicBaseUrl, CODEX_PROFILE, CODEX_PROFILE_PATH, codexProfile, MCP_CONFIG_PATH, mcpConfig, mcpServerNames,
  OPENCODE_CONFIG_PATH, opencodeConfig, runEnv, secretsOf
} from './credentials.js'
import { systemPrompt, taskPlan, type SkillLine } from './prompt.js'
import type { RunPlan } from './run.js'
import { argvFile, RUNS_DIR, type SandboxFile } from './setup.js'

/*
 * Everything a run needs, decided on the server before anything touches the sandbox: the resolved
 * model and turns, argv and stdin (argv.ts), the per-exec environment (credentials.ts), and the files
 * written into the run directory and the CLI's configuration.
 */

export interface PlanDeps {
  sandbox: SandboxService
  links: LinkService
  runtimeCli: RuntimeCliService
  /** The skills offered to this user (prompt-render), for the sub-agent's system prompt; optional. */
  skills?: (email: string | undefined) => Promise<SkillLine[]>
  log: FastifyBaseLogger
}

export interface PlanSettings {
  cli: SubagentCli
  timeoutS: number
  maxTurns: number
  networkEnabled: boolean
  cliEnv: Record<string, string>
  progressIntervalS: number
  killGraceMs: number
}

export interface PlanInput {
  chatId: string
  user: RequestUser
  runId: string
  task: string
  description: string
  workingDirectory: string
  model: string
  maxTurns: number
  resumeSessionId?: string
}

export async function buildRunPlan (deps: PlanDeps, s: PlanSettings, v: PlanInput): Promise<{ run: RunPlan, secrets: string[] }> {
  const runDir = `${RUNS_DIR}/${v.runId}`
  const planPath = `${runDir}/task_plan.md`
  const skills = await deps.skills?.(v.user.email).catch((err: unknown) => { deps.log.warn({ err }, 'skills for the sub-agent prompt unavailable'); return [] }) ?? []
  const system = systemPrompt({ planPath, workingDirectory: v.workingDirectory, filesBase: deps.links.filesBase(v.chatId), skills, timeoutS: s.timeoutS })
  const files: SandboxFile[] = [{ path: planPath, content: taskPlan({ task: v.task, description: v.description, workingDirectory: v.workingDirectory, resumed: v.resumeSessionId !== undefined, startedAt: new Date() }) }]
  const mcpNames = s.cli === 'claude' ? mcpServerNames(v.user) : []
  const spec: RunSpec = { cli: s.cli, task: v.task, system, model: v.model, maxTurns: v.maxTurns, workingDirectory: v.workingDirectory, runDir }
  if (v.resumeSessionId !== undefined) spec.resumeSessionId = v.resumeSessionId
  if (mcpNames.length > 0) {
    files.push({ path: MCP_CONFIG_PATH, content: mcpConfig(mcpNames, anthropicBaseUrl(s.cliEnv, v.user), v.user.email) })
    spec.mcpConfigPath = MCP_CONFIG_PATH
  }
  if (s.cli === 'codex') {
    const profile = codexProfile(s.cliEnv)
    if (profile !== undefined) { files.push({ path: CODEX_PROFILE_PATH, content: profile }); spec.codexProfile = CODEX_PROFILE }
    const baseUrl = s.cliEnv.OPENAI_BASE_URL
    if (baseUrl !== undefined && baseUrl !== '') spec.openaiBaseUrl = baseUrl
  }
  if (s.cli === 'opencode') {
    const config = opencodeConfig(s.cliEnv, v.user)
    if (config.extraInvalid) deps.log.warn('OPENCODE_CONFIG_EXTRA is not a JSON object; it was ignored')
    files.push({ path: OPENCODE_CONFIG_PATH, content: config.text })
  }
  const invocation = buildInvocation(spec)
  files.push({ path: `${runDir}/argv`, content: argvFile(invocation.argv) }, { path: `${runDir}/stdin`, content: invocation.stdin })
  const env = runEnv({ cli: s.cli, cliEnv: s.cliEnv, user: v.user, networkEnabled: s.networkEnabled })
  const run: RunPlan = {
    cli: s.cli,
    bin: CLIS[s.cli].bin,
    chatId: v.chatId,
    runDir,
    workingDirectory: v.workingDirectory,
    files,
    mcpNames,
    env,
    timeoutS: s.timeoutS,
    killGraceMs: s.killGraceMs,
    progressIntervalS: s.progressIntervalS,
    textFallback: s.cli === 'codex'
  }
  return { run, secrets: secretsOf(env) }
}
