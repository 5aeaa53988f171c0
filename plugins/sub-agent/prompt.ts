import { SANDBOX_HOME, SANDBOX_OUTPUTS, SANDBOX_SKILLS, SANDBOX_UPLOADS } from '../../core/chat-paths.js'
import { oneLine } from './text.js'

/*
 * What the sub-agent is told (docs/contract.md#sub-agent-execution): the system prompt (own words) and the task plan file
 * it reads first and re-reads. The task itself goes to the CLI as its prompt; the plan file keeps
 * it on disk so the agent can come back to it after long tool output has pushed it out of view.
 */

/** A skill in the /skill-list line format (docs/contract.md#skills). */
export interface SkillLine { name: string, location: string, description: string }

export interface SystemPromptInput {
  planPath: string
  workingDirectory: string
  /** Public base URL of the outputs directory (files token included in protected mode). */
  filesBase: string
  skills: readonly SkillLine[]
  timeoutS: number
}

/** `- <name>: <location> - <description cut to 120 chars>` (docs/contract.md#skills). */
export const skillListLine = (s: SkillLine): string => `- ${s.name}: ${s.location} - ${oneLine(s.description, 120)}`

export function systemPrompt (v: SystemPromptInput): string {
  const lines = [
    'You are an autonomous coding agent working inside a Linux sandbox on behalf of another AI assistant, which will read your final answer. No human is watching and nobody can answer questions: decide for yourself, work until the task is done, then stop.',
    '',
    `Your task is written in ${v.planPath}. Read that file before you start, and re-read it whenever you are unsure what is still missing: it is the authoritative statement of the task.`,
    '',
    'Environment:',
    `- Working directory: ${v.workingDirectory}. Your home ${SANDBOX_HOME} persists between runs.`,
    `- ${SANDBOX_UPLOADS}: files the user uploaded (read-only).`,
    `- ${SANDBOX_OUTPUTS}: deliverables for the user. A file saved there is published at ${v.filesBase}/<its path relative to outputs, each segment percent-encoded>.`,
    `- You run as the unprivileged user assistant, without a terminal; use non-interactive commands only. You are stopped after ${v.timeoutS} seconds.`,
    '',
    'When you finish, answer with a short report: what you did, which files you created or changed (full paths), how you checked the result, and anything left undone.'
  ]
  if (v.skills.length > 0) {
    lines.push('', `Skills (tested instructions for particular kinds of work; read a skill's SKILL.md before doing that kind of work; all under ${SANDBOX_SKILLS}):`, ...v.skills.map(skillListLine))
  }
  return lines.join('\n')
}

export interface PlanInput {
  task: string
  description: string
  workingDirectory: string
  resumed: boolean
  startedAt: Date
}

/** The task plan file: the caller's task verbatim, with a short header. */
export function taskPlan (v: PlanInput): string {
  return [
    `# Task: ${oneLine(v.description, 200)}`,
    '',
    `Started: ${v.startedAt.toISOString()} | Working directory: ${v.workingDirectory}${v.resumed ? ' | Follow-up in a resumed session' : ''}`,
    '',
    '## Task',
    '',
    v.task,
    ''
  ].join('\n')
}
