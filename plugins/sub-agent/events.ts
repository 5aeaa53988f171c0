import type { SubagentCli } from '../../core/config.js'
import { TailBuffer } from './text.js'
import { isObject } from './json.js'
import { createClaudeReader } from './events-claude.js'
import { createCodexReader } from './events-codex.js'
import { createOpencodeReader } from './events-opencode.js'

/*
 * The CLIs' event streams (stdout): JSON lines for all three (claude --output-format stream-json,
 * codex --json, opencode --format json). Each reader turns lines into the latest action (progress)
 * and the run's outcome (result). Output is untrusted: lines are bounded, malformed lines are
 * skipped, every field is type-checked.
 */

/** What a run produced, as far as its event stream tells. Unknown values stay undefined. */
export interface RunOutcome {
  /** The agent's final answer. */
  text?: string
  /** USD, only when > 0. */
  costUsd?: number
  /** Only when > 0. */
  turns?: number
  sessionId?: string
  /** The CLI itself reported a failed run. */
  isError: boolean
  /** The last error message the CLI reported (for runs that end without text). */
  errorText?: string
}

export interface EventReader {
  /** Takes one complete line; returns the action it reveals (tool use, thinking …), if any. */
  line: (json: Record<string, unknown>) => string | undefined
  outcome: () => RunOutcome
}

/** Longest line parsed; longer lines (huge tool results echoed in the stream) are skipped whole. */
export const MAX_LINE_CHARS = 8 * 1024 * 1024
const RAW_TAIL_CHARS = 8192

/**
 * Splits the decoded stdout stream into lines for a reader. Lines that are not JSON objects are kept
 * in a bounded tail (codex prints plain text on some failures; docs/contract.md#sub-agent-result: stdout is a text fallback).
 */
export class EventStream {
  private partial = ''
  private overflow = false
  private readonly raw = new TailBuffer(RAW_TAIL_CHARS)
  readonly reader: EventReader

  constructor (cli: SubagentCli, private readonly onAction: (action: string) => void) {
    this.reader = READERS[cli]()
  }

  push (text: string): void {
    let start = 0
    for (let nl = text.indexOf('\n'); nl !== -1; nl = text.indexOf('\n', start)) {
      this.take(text.slice(start, nl), true)
      start = nl + 1
    }
    this.take(text.slice(start), false)
  }

  /** Flushes a last line without a newline. */
  end (): void { if (this.partial !== '' && !this.overflow) this.handle(this.partial); this.partial = ''; this.overflow = false }

  /** Non-JSON stdout, last 8 KiB. */
  rawText (): string { return this.raw.value() }

  private take (piece: string, complete: boolean): void {
    if (!this.overflow && this.partial.length + piece.length > MAX_LINE_CHARS) {
      this.overflow = true
      this.partial = ''
    }
    if (!this.overflow) this.partial += piece
    if (!complete) return
    const line = this.partial
    const skipped = this.overflow
    this.partial = ''
    this.overflow = false
    if (!skipped) this.handle(line)
  }

  private handle (line: string): void {
    const trimmed = line.trim()
    if (trimmed === '') return
    if (trimmed[0] !== '{') { this.raw.push(trimmed + '\n'); return }
    let value: unknown
    try { value = JSON.parse(trimmed) } catch { this.raw.push(trimmed.slice(0, 2000) + '\n'); return }
    if (!isObject(value)) return
    const action = this.reader.line(value)
    if (action !== undefined && action !== '') this.onAction(action)
  }
}

const READERS: Record<SubagentCli, () => EventReader> = {
  claude: createClaudeReader,
  codex: createCodexReader,
  opencode: createOpencodeReader
}

/** Parses a whole captured stdout at once (tests, and the same path the streaming reader takes). */
export function parseOutput (cli: SubagentCli, stdout: string): { outcome: RunOutcome, actions: string[], raw: string } {
  const actions: string[] = []
  const stream = new EventStream(cli, a => actions.push(a))
  stream.push(stdout)
  stream.end()
  return { outcome: stream.reader.outcome(), actions, raw: stream.rawText() }
}
