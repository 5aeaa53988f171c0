import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { cpLength, cutTo, firstCodePoints, isBlank, stripAnsi } from './text.js'

/** Exit status 1 of these commands is information, not failure (§3.3). */
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
}

export const SANDBOX_STOPPED = 'Error: the sandbox stopped while the command was running'

/** The result table of §3.3. */
export function bashResult (o: BashOutcome): CallToolResult {
  const text = (body: string): CallToolResult => ({ content: [{ type: 'text', text: body }] })
  const blank = isBlank(o.output)
  if (o.timedOut) {
    const note = `[Command timed out after ${o.timeoutSeconds} seconds]`
    return text(blank ? note : `${o.output}\n${note}`)
  }
  if (o.exitCode === null) return { isError: true, content: [{ type: 'text', text: SANDBOX_STOPPED }] }
  if (o.exitCode === 0) return text(blank ? '[No output]' : o.output)
  const semantic = semanticMessage(o.command, o.exitCode)
  if (semantic !== undefined) return text(blank ? semantic : o.output)
  return text(blank ? `[Exit code: ${o.exitCode}]` : `${o.output}\n[Exit code: ${o.exitCode}]`)
}

/** `45s`, `2m`, `2m 15s` (§3.3 progress). */
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
