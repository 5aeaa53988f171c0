import type { EventReader, RunOutcome } from './events.js'
import { ACTION_CHARS, shellJoin, textAction, toolAction } from './actions.js'
import { isObject, sessionId, str } from './json.js'
import { oneLine } from './text.js'

/*
 * codex exec --json: `thread.started` (thread_id = the session id resume takes), `item.started` /
 * `item.completed` with items of type command_execution, file_change, agent_message, reasoning,
 * mcp_tool_call, web_search, error; `turn.completed`, `turn.failed`, top-level `error`. Text is the
 * last completed agent_message (docs/contract.md#sub-agent-result); cost and turns are not reported.
 */
export function createCodexReader (): EventReader {
  const o: RunOutcome = { isError: false }
  let text: string | undefined
  let lastError: string | undefined
  return {
    line (ev) {
      const type = str(ev.type)
      if (type === 'thread.started') { o.sessionId = sessionId(ev.thread_id) ?? o.sessionId; return 'Starting' }
      if (type === 'turn.failed') {
        o.isError = true
        lastError = isObject(ev.error) ? str(ev.error.message) ?? lastError : lastError
        return undefined
      }
      if (type === 'error') { lastError = str(ev.message) ?? lastError; return undefined }
      if ((type !== 'item.started' && type !== 'item.completed') || !isObject(ev.item)) return undefined
      const item = ev.item
      if (item.type === 'agent_message' && type === 'item.completed' && typeof item.text === 'string') {
        if (item.text.trim() !== '') text = item.text
        return textAction(item.text)
      }
      return type === 'item.started' || item.type === 'file_change' ? itemAction(item) : undefined
    },
    outcome () {
      const out: RunOutcome = { ...o }
      if (text !== undefined) out.text = text
      if (lastError !== undefined) out.errorText = lastError
      return out
    }
  }
}

function itemAction (item: Record<string, unknown>): string | undefined {
  switch (item.type) {
    case 'command_execution': {
      const cmd = typeof item.command === 'string' ? unwrapShell(item.command) : Array.isArray(item.command) ? shellJoin(item.command.filter((x): x is string => typeof x === 'string')) : ''
      return oneLine(`Running: ${cmd}`, ACTION_CHARS)
    }
    case 'file_change': {
      const paths = Array.isArray(item.changes) ? item.changes.map(c => isObject(c) ? str(c.path) : undefined).filter((p): p is string => p !== undefined) : []
      return oneLine(`Editing: ${paths.join(', ') || 'files'}`, ACTION_CHARS)
    }
    case 'reasoning': return 'Thinking'
    case 'mcp_tool_call': return toolAction(`${str(item.server) ?? 'mcp'}.${str(item.tool) ?? 'tool'}`, item.arguments)
    case 'web_search': return toolAction('Searching', { query: item.query })
    case 'todo_list': return 'Updating its plan'
    default: return undefined
  }
}

const SHELL_PREFIX = /^(?:\/usr)?(?:\/bin\/)?(?:ba|z)?sh -l?c /

/** `/bin/bash -lc 'npm test'` → `npm test` (codex reports the shell wrapper as one shell-quoted string). */
export function unwrapShell (command: string): string {
  const m = SHELL_PREFIX.exec(command)
  if (m === null) return command
  const word = shellWord(command.slice(m[0].length))
  return word ?? command
}

/** The value of exactly one POSIX shell word ('…', "…" with \ escapes, bare \x), or undefined. Linear. */
function shellWord (s: string): string | undefined {
  let out = ''
  let i = 0
  while (i < s.length) {
    const c = s[i] as string
    if (c === "'") {
      const end = s.indexOf("'", i + 1)
      if (end === -1) return undefined
      out += s.slice(i + 1, end)
      i = end + 1
    } else if (c === '"') {
      i++
      while (i < s.length && s[i] !== '"') {
        if (s[i] === '\\' && i + 1 < s.length && '"\\$`'.includes(s[i + 1] as string)) i++
        out += s[i]
        i++
      }
      if (i >= s.length) return undefined
      i++
    } else if (c === '\\' && i + 1 < s.length) {
      out += s[i + 1]
      i += 2
    } else if (/\s/.test(c)) {
      return undefined
    } else {
      out += c
      i++
    }
  }
  return out
}
