import type { RunOutcome } from './events.js'
import { capHeadTail, cutTo, redact, stripControls } from './text.js'

/*
 * The result text of docs/contract.md#sub-agent-result. Completed runs show the agent's answer (capped head + tail);
 * runs that were killed, timed out or crashed without an answer get the Terminated form with the
 * reason, the last action seen and the end of the CLI's error output, so the caller can decide
 * whether to resume.
 */

export interface Ending {
  /** Exit status of the CLI; null when unknown (the sandbox stopped under it). */
  exitCode: number | null
  timedOut: boolean
}

export interface FormatInput {
  displayModel: string
  maxTurns: number
  durationMs: number
  timeoutS: number
  outcome: RunOutcome
  ending: Ending
  /** Agent text cap (MAX_OUTPUT_CHARS). */
  maxChars: number
  /** Last action seen in the event stream. */
  lastAction?: string
  /** End of the CLI's stderr (and non-JSON stdout), shown when the run produced no answer. */
  errorOutput?: string
  /** Values never to show (credentials of the run). */
  secrets?: readonly string[]
}

const ERROR_OUTPUT_CHARS = 1500

/** `$0.0042`; `unavailable` when unknown or 0; never `$0.00` or `$0.0000` (docs/contract.md#sub-agent-result). */
export function formatCost (usd: number | undefined): string {
  if (usd === undefined || !Number.isFinite(usd) || usd <= 0) return 'unavailable'
  return usd < 0.00005 ? '<$0.0001' : `$${usd.toFixed(4)}`
}

export const formatDuration = (ms: number): string => `${(Math.max(0, ms) / 1000).toFixed(1)}s`

/** Why a run ended without an answer (the Terminated reasons of docs/contract.md#sub-agent-result), or undefined when it completed. */
export function terminationReason (ending: Ending, outcome: RunOutcome, timeoutS: number): string | undefined {
  const { exitCode } = ending
  if (ending.timedOut || exitCode === 124) return `timed out after ${timeoutS}s`
  if (exitCode === 137 || exitCode === -9) return 'killed by SIGKILL'
  if (exitCode === 143 || exitCode === -15) return 'terminated by SIGTERM'
  if (outcome.text !== undefined) return undefined
  if (exitCode === null) return 'ended without an exit status (the sandbox stopped or restarted)'
  if (exitCode === 0) return 'crashed before producing results'
  return `failed with exit code ${exitCode}`
}

const sessionLine = (id: string | undefined): string[] =>
  id === undefined ? [] : ['', `**Session ID:** \`${id}\` (hint: pass it as resume_session_id to continue)`]

/** The result text and whether it is an error (Completed (success) is the only non-error, docs/contract.md#common-tool-rules). */
export function formatResult (input: FormatInput): { text: string, isError: boolean } {
  const { outcome, ending } = input
  const secrets = input.secrets ?? []
  const clean = (s: string): string => redact(stripControls(s), secrets)
  const reason = terminationReason(ending, outcome, input.timeoutS)
  const duration = formatDuration(input.durationMs)
  if (reason !== undefined) {
    const lines = [
      `**Sub-Agent Terminated** (${reason})`,
      `**Model:** ${input.displayModel} | **Duration:** ${duration}`,
      '',
      'The agent process ended before producing results; files it already changed stay as they are.'
    ]
    if (input.lastAction !== undefined) lines.push(`Last action: ${clean(input.lastAction)}`)
    const details = [outcome.errorText, input.errorOutput].filter((s): s is string => s !== undefined && s.trim() !== '').map(clean).join('\n').trim()
    if (details !== '') lines.push('', 'Error output (end):', '```', tail(details, ERROR_OUTPUT_CHARS), '```')
    lines.push(...sessionLine(outcome.sessionId))
    return { text: lines.join('\n'), isError: true }
  }
  const success = ending.exitCode === 0 && !outcome.isError
  const turns = `${outcome.turns ?? '?'}/${input.maxTurns}`
  const answer = capHeadTail(clean(outcome.text ?? ''), input.maxChars)
  const lines = [
    `**Sub-Agent Completed** (${success ? 'success' : 'error'})`,
    `**Model:** ${input.displayModel} | **Turns:** ${turns} | **Cost:** ${formatCost(outcome.costUsd)} | **Duration:** ${duration}`,
    '',
    answer,
    ...sessionLine(outcome.sessionId)
  ]
  return { text: lines.join('\n'), isError: !success }
}

/** The last `max` characters, starting at a line boundary when one is near. */
function tail (text: string, max: number): string {
  if (text.length <= max) return text
  const cut = text.slice(-max)
  const nl = cut.indexOf('\n')
  return '…' + (nl !== -1 && nl < 200 ? cut.slice(nl + 1) : cutTo(cut, max))
}
