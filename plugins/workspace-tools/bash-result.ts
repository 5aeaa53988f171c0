import type { CallToolResult } from '@modelcontextprotocol/server'
import type { SandboxNotice } from '../sandbox/types.js'
import { cpLength, cutTo, firstCodePoints, isBlank, stripAnsi } from './text.js'
import type { CommandFacts, ResultNote } from './types.js'

/** Exit status 1 of these commands is information, not failure (docs/contract.md#bash_tool). */
const SEMANTIC: Record<string, string> = {
  grep: 'No matches found',
  rg: 'No matches found',
  find: 'Some directories were inaccessible',
  diff: 'Files differ',
  test: 'Condition is false',
  '[': 'Condition is false'
}

/** Wrappers skipped when looking for the first command, with their options that take a separate value. */
const WRAPPERS: Record<string, Set<string>> = {
  sudo: new Set(['-u', '-g', '-C', '-D', '-h', '-p', '-r', '-t', '-U', '-T', '-R']),
  env: new Set(['-u', '-C', '-S', '--unset', '--chdir', '--split-string']),
  nice: new Set(['-n', '--adjustment']),
  time: new Set(['-f', '-o', '--format', '--output']),
  strace: new Set(['-o', '-e', '-p', '-s', '-u', '-a', '-E', '-P', '-S', '-X', '-b', '-I', '-O', '-U'])
}

const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*=/

/** Splits the start of a command line into words: quotes removed, stopping at the first shell operator. */
function leadingWords (command: string, limit = 64): string[] {
  const words: string[] = []
  let word: string | undefined
  let quote: '"' | "'" | undefined
  for (let i = 0; i < command.length && words.length < limit; i++) {
    const c = command[i] as string
    if (quote !== undefined) {
      if (c === quote) quote = undefined
      else if (c === '\\' && quote === '"' && i + 1 < command.length) word = (word ?? '') + command[++i]
      else word = (word ?? '') + c
    } else if (c === '"' || c === "'") {
      quote = c
      word = word ?? ''
    } else if (c === '\\' && i + 1 < command.length) {
      word = (word ?? '') + command[++i]
    } else if (/\s/.test(c) || ';|&()<>'.includes(c)) {
      if (word !== undefined) { words.push(word); word = undefined }
      if (!/\s/.test(c)) break
    } else {
      word = (word ?? '') + c
    }
  }
  if (word !== undefined && words.length < limit) words.push(word)
  return words
}

/**
 * The basename of the first command after leading `NAME=value` assignments and the wrappers sudo,
 * env, nice, time and strace with their options (`FOO=1 /usr/bin/grep x` → `grep`).
 */
export function firstCommand (command: string): string | undefined {
  const words = leadingWords(command)
  let i = 0
  while (i < words.length) {
    const word = words[i] as string
    if (ASSIGNMENT.test(word)) { i++; continue }
    const base = word.slice(word.lastIndexOf('/') + 1)
    const takesValue = WRAPPERS[base]
    if (takesValue === undefined) return base === '' ? undefined : base
    i++
    while (i < words.length) {
      const opt = words[i] as string
      if (opt === '--') { i++; break }
      if (!opt.startsWith('-') || opt === '-') break
      i += takesValue.has(opt) ? 2 : 1
    }
  }
  return undefined
}

/** The informational message for exit status 1 of a grep/find/diff/test-like command, else undefined. */
export function semanticMessage (command: string, exitCode: number | null): string | undefined {
  if (exitCode !== 1) return undefined
  const first = firstCommand(command)
  return first === undefined ? undefined : SEMANTIC[first]
}

export interface BashOutcome {
  command: string
  /** null: status unknown (stream lost, sandbox died) */
  exitCode: number | null
  timedOut: boolean
  /** The capped output (head + marker + tail when truncated). */
  output: string
  timeoutSeconds: number
  /** What happened to the sandbox around the command (the first one explains an unknown status). */
  notices?: SandboxNotice[]
  /** Code points the whole text may take (notes are dropped from the end, then cut, to fit). */
  limit?: number
}

/** Unknown status and the sandbox could not say why (its state could not be checked). */
export const SANDBOX_STOPPED = 'Error: the command ended without an exit status: the sandbox stopped or the connection to it was lost, and its state could not be checked'
/** Output shown before an unknown-status error, at most (code points, the end is kept). */
const ERROR_OUTPUT_CHARS = 1000

/** The result table of docs/contract.md#bash_tool, with the sandbox notices as trailing `[Note: …]` lines. */
export function bashResult (o: BashOutcome): CallToolResult {
  const text = (body: string): CallToolResult => ({ content: [{ type: 'text', text: body }] })
  const blank = isBlank(o.output)
  const notices = o.notices ?? []
  const notes = (list: SandboxNotice[]): string => fitNotes(list, o.limit === undefined ? Infinity : o.limit - cpLength(o.output) - 300)
  if (o.timedOut) {
    const note = `[Command timed out after ${o.timeoutSeconds} seconds]`
    return text((blank ? note : `${o.output}\n${note}`) + notes(notices))
  }
  if (o.exitCode === null) {
    const [cause, ...rest] = notices
    let body = cause === undefined ? SANDBOX_STOPPED : `Error: ${lostText(cause)}`
    if (!blank) body += `\n\nOutput before that (last ${ERROR_OUTPUT_CHARS} characters at most):\n${lastCodePoints(o.output, ERROR_OUTPUT_CHARS)}`
    return { isError: true, content: [{ type: 'text', text: body + notes(rest) }] }
  }
  if (o.exitCode === 0) return text((blank ? '[No output]' : o.output) + notes(notices))
  const semantic = semanticMessage(o.command, o.exitCode)
  if (semantic !== undefined) return text((blank ? semantic : o.output) + notes(notices))
  return text((blank ? `[Exit code: ${o.exitCode}]` : `${o.output}\n[Exit code: ${o.exitCode}]`) + notes(notices))
}

/** `[Note: …]` lines within `room` code points: later notes are dropped first, a lone note is cut. */
function fitNotes (list: SandboxNotice[], room: number): string {
  const lines = list.map(n => `\n\n[Note: ${noticeText(n)}]`)
  while (lines.length > 1 && cpLength(lines.join('')) > room) lines.pop()
  const text = lines.join('')
  return cpLength(text) <= room ? text : room > 40 ? `${cutTo(text, room - 1)}]` : ''
}

/** 512 bytes, 80 MiB, 1.5 GiB (binary units, as the limits are configured). */
export function formatBytes (n: number): string {
  const units = ['KiB', 'MiB', 'GiB', 'TiB']
  if (n < 1024) return `${Math.max(0, Math.round(n))} bytes`
  let v = n / 1024
  let i = 0
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++ }
  return `${v < 10 ? (Math.round(v * 10) / 10).toString() : Math.round(v).toString()} ${units[i] as string}`
}

const KEPT = 'Files in /home/assistant and /mnt/user-data/outputs are kept'
const LOST = 'every running process, background jobs included, was stopped and /tmp may be empty'

function diskBreakdown (n: Extract<SandboxNotice, { kind: 'disk-limit' }>): string {
  const u = n.usage
  return `${formatBytes(u.total)} used of its ${formatBytes(n.limit)} disk limit: /home/assistant ${formatBytes(u.home)}, ` +
    `/mnt/user-data/outputs ${formatBytes(u.outputs)}, other files ${formatBytes(u.other)}`
}

const FREE_SPACE = 'Free space now: find what is big with `du -sh /home/assistant/* /home/assistant/.[!.]* /mnt/user-data/outputs/* 2>/dev/null | sort -h | tail` and delete what is not needed with rm'

/** The text of one notice, as a complete sentence or two (no `Error:` prefix). */
export function noticeText (n: SandboxNotice): string {
  switch (n.kind) {
    case 'pids-limit':
      return `The sandbox reached its process limit (${n.limit} processes): something kept starting processes (a fork bomb or a runaway loop), so new ones could not start. ` +
        (n.action === 'restarted'
          ? `The sandbox was restarted: ${LOST}. ${KEPT}. If this command's output shows fork errors, run it again.`
          : `The sandbox was stopped and starts again with the next command. ${KEPT}.`)
    case 'out-of-memory':
      if (n.action === 'restarted') return `The sandbox ran out of memory (limit ${formatBytes(n.limit)}) and could not start processes any more, so it was restarted: ${LOST}. ${KEPT}.`
      if (n.action === 'stopped') return `The sandbox ran out of memory (limit ${formatBytes(n.limit)}) and the kernel killed its main process, which stopped it; the next command starts it again. ${KEPT}; running processes are gone.`
      return `The sandbox ran out of memory (limit ${formatBytes(n.limit)}) and the kernel killed a process (exit status 137 means killed). Use less memory at once (process data in parts, stream instead of loading whole files) or stop background processes that hold memory.`
    case 'disk-limit':
      return n.action === 'stopped'
        ? `This chat had ${diskBreakdown(n)}, so the sandbox was stopped and the processes writing were killed. ${KEPT}, and the sandbox starts again with the next command. ${FREE_SPACE}; while the chat stays over its limit, it is stopped again as soon as it grows.`
        : `This chat is over its disk limit (${diskBreakdown(n)}). ${FREE_SPACE}; while it stays over the limit, the sandbox is stopped as soon as it writes more.`
    case 'sandbox-stopped': {
      const what = n.removed ? 'removed' : 'stopped'
      const who = n.by === 'outside' ? 'outside this server (by an administrator, or an engine restart)' : 'by the server on purpose'
      if (n.action === 'recreated') return `The sandbox had been removed ${who}; a new one was created for this command on the same workspace. ${KEPT}; files elsewhere (such as installed packages) and all processes are gone.`
      if (n.action === 'restarted') return `The sandbox had been stopped ${who}; it was started again for this command. ${KEPT}; processes that were running, background jobs included, are gone.`
      return `The sandbox was ${what} ${who}. The next command starts it again${n.removed ? ' (as a new sandbox on the same workspace)' : ''}. ${KEPT}.`
    }
    case 'stream-lost':
      return 'The connection to the command was lost before it finished. The sandbox is still running, so the command may still be running too: check with `ps -ef`.'
    case 'unkillable':
      return `Processes of a timed-out or cancelled command could not be killed from inside the sandbox, so it was ${n.action === 'restarted' ? `restarted: ${LOST}` : 'stopped; the next command starts it again'}. ${KEPT}.`
  }
}

/** An unknown exit status explained by its cause. */
function lostText (n: SandboxNotice): string {
  const status = 'The exit status of the command is unknown.'
  switch (n.kind) {
    case 'sandbox-stopped': return `the sandbox was ${n.removed ? 'removed' : 'stopped'} while the command was running. ${status} ${noticeText(n)}`
    case 'stream-lost': return `the command's exit status is unknown. ${noticeText(n)}`
    case 'pids-limit':
    case 'out-of-memory':
    case 'disk-limit':
    case 'unkillable': return `the command was cut off. ${status} ${noticeText(n)}`
  }
}

function lastCodePoints (text: string, n: number): string {
  const cps = Array.from(text.length > n * 2 + 8 ? text.slice(-(n * 2 + 8)) : text)
  return cps.length <= n ? cps.join('') : cps.slice(-n).join('')
}

/** `45s`, `2m`, `2m 15s` (docs/contract.md#bash_tool progress). */
export function formatElapsed (seconds: number): string {
  const s = Math.max(0, Math.floor(seconds))
  if (s < 60) return `${s}s`
  const m = Math.floor(s / 60)
  const rest = s % 60
  return rest === 0 ? `${m}m` : `${m}m ${rest}s`
}

/** The last non-blank line of recent output, ANSI escapes removed, cut to 120 chars. */
export function lastOutputLine (recent: string): string | undefined {
  const lines = recent.split(/\r\n|\r|\n/)
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = stripAnsi(lines[i] as string).trim()
    if (line !== '') return cutTo(line, 120)
  }
  return undefined
}

/** `Running: <description> (<elapsed>)` plus `\n→ <last output line>` once the command printed something. */
export function progressMessage (description: string, command: string, elapsedSeconds: number, recent: string): string {
  const what = isBlank(description) ? firstCodePoints(command.trim(), 60) : description.trim()
  const line = lastOutputLine(recent)
  const head = `Running: ${what} (${formatElapsed(elapsedSeconds)})`
  return line === undefined ? head : `${head}\n→ ${line}`
}

/**
 * Appends the output-links line, dropping links from the end until the text fits `limit` code points.
 * `links` are `[relative path, URL]`; at most 10 are listed, the rest counted.
 */
export function appendOutputLinks (text: string, links: Array<[string, string]>, limit: number): string {
  if (links.length === 0) return text
  const budget = limit - cpLength(text)
  for (let n = Math.min(10, links.length); n > 0; n--) {
    const shown = links.slice(0, n).map(([rel, url]) => `${rel}: ${url}`).join(', ')
    const more = links.length > n ? ` (and ${links.length - n} more)` : ''
    const line = `\n\n[Files created or modified in /mnt/user-data/outputs: ${shown}${more}]`
    if (cpLength(line) <= budget) return text + line
  }
  return text
}

/** The answers of other plugins' result notes (types.ts ResultNote), each within 3 s; failures and empty answers left out. */
export async function resultNotes (notes: readonly ResultNote[], chatId: string, facts: CommandFacts = {}, timeoutMs = 3000): Promise<string[]> {
  if (notes.length === 0) return []
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<undefined>(resolve => { timer = setTimeout(() => { resolve(undefined) }, timeoutMs).unref() })
  try {
    const answers = await Promise.all(notes.map(async note => await Promise.race([note(chatId, facts).catch(() => undefined), late])))
    return answers.filter((a): a is string => typeof a === 'string' && a !== '')
  } finally {
    clearTimeout(timer)
  }
}

/** Appends each note on its own paragraph while it fits the limit. */
export function appendNotes (text: string, notes: readonly string[], limit: number): string {
  let out = text
  for (const note of notes) {
    const line = `\n\n${note}`
    if (cpLength(out) + cpLength(line) <= limit) out += line
  }
  return out
}
