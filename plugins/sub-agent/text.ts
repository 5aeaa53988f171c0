/*
 * Small text helpers for untrusted CLI output: everything the sandbox prints is cleaned and bounded
 * before it reaches a result, a progress message or a route.
 */

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g
// eslint-disable-next-line no-control-regex
const CONTROL_AND_NEWLINES = /[\u0000-\u001f\u007f-\u009f]+/g

/** One line: control characters and newlines become single spaces, cut to `max` code points (… when cut). */
export function oneLine (text: string, max: number): string {
  const flat = text.replace(CONTROL_AND_NEWLINES, ' ').replace(/ {2,}/g, ' ').trim()
  return cutTo(flat, max)
}

/** Cuts to `max` code points, ending with … when cut. Surrogate pairs are never split. */
export function cutTo (text: string, max: number): string {
  if (text.length <= max) return text
  const cps = Array.from(text)
  return cps.length <= max ? text : cps.slice(0, Math.max(0, max - 1)).join('') + '…'
}

/** Removes control characters other than tab and newline (terminal escapes in CLI output). */
export const stripControls = (text: string): string => text.replace(CONTROL, '')

/**
 * Caps text like bash output: at most `max` code points, keeping the first and the last half with a
 * note about what was left out in between.
 */
export function capHeadTail (text: string, max: number): string {
  if (text.length <= max) return text
  const cps = Array.from(text)
  if (cps.length <= max) return text
  const half = Math.floor(max / 2)
  const omitted = cps.length - 2 * half
  return `${cps.slice(0, half).join('')}\n\n[... ${omitted} characters of the agent's answer omitted ...]\n\n${cps.slice(cps.length - half).join('')}`
}

/** Replaces every occurrence of each secret (8+ characters) with [redacted]. */
export function redact (text: string, secrets: readonly string[]): string {
  let out = text
  for (const secret of secrets) {
    if (secret.length >= 8 && out.includes(secret)) out = out.split(secret).join('[redacted]')
  }
  return out
}

/** Keeps the last `max` characters pushed (a bounded tail of a stream). */
export class TailBuffer {
  private text = ''
  constructor (private readonly max: number) {}
  push (chunk: string): void {
    this.text += chunk
    if (this.text.length > this.max * 2) this.text = this.text.slice(-this.max)
  }

  value (): string { return this.text.length > this.max ? this.text.slice(-this.max) : this.text }
}
