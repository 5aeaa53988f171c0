import type { EventReader, RunOutcome } from './events.js'
import { toolAction, textAction } from './actions.js'
import { isObject, positive, sessionId, str } from './json.js'

/*
 * claude -p --output-format stream-json --verbose (also plain --output-format json, one line):
 * `system/init` carries the session id, `assistant` messages carry text and tool_use blocks, the
 * last `result` object carries result, total_cost_usd, num_turns, is_error and session_id (docs/contract.md#sub-agent-result).
 */
export function createClaudeReader (): EventReader {
  const o: RunOutcome = { isError: false }
  let result: Record<string, unknown> | undefined
  return {
    line (ev) {
      const session = sessionId(ev.session_id)
      if (session !== undefined) o.sessionId = session
      if (ev.type === 'system' && ev.subtype === 'init') return `Starting (${str(ev.model) ?? 'model'})`
      if (ev.type === 'result') { result = ev; return undefined }
      if (ev.type !== 'assistant' || !isObject(ev.message) || !Array.isArray(ev.message.content)) return undefined
      let action: string | undefined
      for (const block of ev.message.content) {
        if (!isObject(block)) continue
        if (block.type === 'tool_use' && typeof block.name === 'string') action = toolAction(block.name, block.input)
        if (block.type === 'text' && typeof block.text === 'string') action ??= textAction(block.text)
        if (block.type === 'thinking') action ??= 'Thinking'
      }
      return action
    },
    outcome () {
      // Without a result object the run ended early (killed, crashed): assistant text seen on the way is not an answer.
      if (result === undefined) return { ...o }
      const text = typeof result.result === 'string' && result.result.trim() !== '' ? result.result : undefined
      const isError = result.is_error === true || (typeof result.subtype === 'string' && result.subtype.startsWith('error'))
      const out: RunOutcome = { ...o, isError }
      if (text !== undefined) out.text = text
      else if (isError) out.errorText = errorOf(result)
      const cost = positive(result.total_cost_usd)
      if (cost !== undefined) out.costUsd = cost
      const turns = positive(result.num_turns)
      if (turns !== undefined) out.turns = Math.floor(turns)
      const session = sessionId(result.session_id)
      if (session !== undefined) out.sessionId = session
      return out
    }
  }
}

/** error_max_turns, error_during_execution …: a readable reason when the result has no text. */
function errorOf (result: Record<string, unknown>): string {
  const subtype = str(result.subtype)
  if (subtype === 'error_max_turns') return `the agent reached its turn limit (max_turns) after ${String(result.num_turns ?? '?')} turns`
  const errors = Array.isArray(result.errors) ? result.errors.filter((e): e is string => typeof e === 'string') : []
  return errors.length > 0 ? errors.join('; ') : subtype ?? 'the CLI reported an error'
}
