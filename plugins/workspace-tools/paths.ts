import { posix } from 'node:path'

export const HOME = '/home/assistant'
export const OUTPUTS = '/mnt/user-data/outputs'
const MAX_PATH_BYTES = 4096

/**
 * Resolves a tool's path argument inside the sandbox: relative paths (and `~`) against /home/assistant,
 * `.`/`..` normalised. Returns an error text for paths no file can have. The result only ever travels
 * as an argv element or stdin, never as shell text.
 */
export function resolveSandboxPath (raw: string): { path: string } | { error: string } {
  const trimmed = raw.trim()
  if (trimmed === '') return { error: 'Error: invalid arguments: path must not be empty' }
  if (trimmed.includes('\u0000')) return { error: 'Error: invalid arguments: path must not contain NUL characters' }
  if (Buffer.byteLength(trimmed) > MAX_PATH_BYTES) return { error: `Error: invalid arguments: path is longer than ${MAX_PATH_BYTES} bytes` }
  const expanded = trimmed === '~' ? HOME : trimmed.startsWith('~/') ? HOME + trimmed.slice(1) : trimmed
  return { path: posix.resolve(HOME, expanded) }
}

/** The path relative to /mnt/user-data/outputs when the file lies below it (for public URLs), else undefined. */
export function outputsRelative (path: string): string | undefined {
  if (!path.startsWith(`${OUTPUTS}/`)) return undefined
  const rel = path.slice(OUTPUTS.length + 1)
  return rel === '' ? undefined : rel
}
