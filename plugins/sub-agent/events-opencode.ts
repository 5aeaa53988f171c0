import type { EventReader, RunOutcome } from './events.js'
import { textAction, toolAction } from './actions.js'
import { isObject, positive, sessionId, str } from './json.js'

/*
 * opencode run --format json: every event carries `sessionID`; `tool_use` parts (tool, state.input),
 * `text` parts, `step_finish` parts with the step's `cost` and tokens, `error` events. Text is the
 * text of the last message that had any (docs/contract.md#sub-agent-result: the last completion); cost is the sum of step costs
 * (or a reported usage.total_cost); turns are the finished steps.
 */
export function createOpencodeReader (): EventReader {
  const o: RunOutcome = { isError: false }
  let cost = 0
  let reportedTotal: number | undefined
  let steps = 0
  let textMessage: string | undefined
  let textParts: string[] = []
  return {
    line (ev) {
      o.sessionId = sessionId(ev.sessionID) ?? o.sessionId
      const part = isObject(ev.part) ? ev.part : undefined
      switch (ev.type) {
        case 'tool_use': {
          if (part === undefined) return undefined
          const state = isObject(part.state) ? part.state : undefined
          return toolAction(str(part.tool) ?? 'tool', state?.input)
        }
        case 'text': {
          if (part === undefined || typeof part.text !== 'string') return undefined
          const message = str(part.messageID) ?? ''
          if (message !== textMessage) { textMessage = message; textParts = [] }
          textParts.push(part.text)
          return textAction(part.text)
        }
        case 'step_finish':
          steps++
          cost += positive(part?.cost) ?? 0
          return undefined
        case 'step_start': return steps === 0 ? 'Starting' : undefined
        case 'error': {
          o.isError = true
          o.errorText = errorText(ev.error) ?? o.errorText
          return undefined
        }
        default: {
          const usage = isObject(ev.usage) ? ev.usage : undefined
          reportedTotal = positive(usage?.total_cost) ?? reportedTotal
          return undefined
        }
      }
    },
    outcome () {
      const out: RunOutcome = { ...o }
      const text = textParts.join('')
      if (text.trim() !== '') out.text = text
      const total = cost > 0 ? cost : reportedTotal
      if (total !== undefined) out.costUsd = total
      if (steps > 0) out.turns = steps
      return out
    }
  }
}

function errorText (error: unknown): string | undefined {
  if (typeof error === 'string') return error
  if (!isObject(error)) return undefined
  const data = isObject(error.data) ? error.data : undefined
  return str(data?.message) ?? str(error.message) ?? str(error.name)
}
