/*
 * Path rules for every route and tool that maps a client path onto a host directory (docs/contract.md#path-rules).
 * Three layers, each closing a different hole:
 *   parseRelPath   – syntax: no traversal segments, no control characters, bounded sizes (400)
 *   resolveInside  – realpath of the candidate must stay below realpath(base) (403)
 *   openVerified   – after open(O_NOFOLLOW), the fd itself is checked, closing the race in which the
 *                    sandbox swaps a path component for a symlink between the check and the open (403)
 * walkRegularFiles (tree-walk.ts) lists a tree by descriptor, so neither a planted symlink nor a directory
 * swapped for one while we walk is ever followed.
 */
import { constants, type Stats } from 'node:fs'
import { lstat, open, readlink, realpath, stat, type FileHandle } from 'node:fs/promises'
import { join, sep } from 'node:path'
import { errnoCode } from './errno.js'
import { CORE_FORBIDDEN, CORE_INVALID_PATH, CORE_PATH_IS_DIRECTORY, CORE_PATH_NOT_FOUND } from './errors.js'

export const MAX_SEGMENT_BYTES = 255
export const MAX_PATH_BYTES = 1024

// U+0000–U+001F and U+007F (docs/contract.md#path-rules); NUL is in that range.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/

/**
 * Splits an already-decoded relative path into segments. Never decodes again (`%2e%2e` stays a literal
 * name). Throws CORE_INVALID_PATH (400) for an empty path or segment, `.`/`..`, `\`, control characters,
 * a segment over 255 UTF-8 bytes or a path over 1,024 bytes.
 */
export function parseRelPath (raw: string): string[] {
  if (typeof raw !== 'string' || raw === '') throw new CORE_INVALID_PATH('empty path')
  if (Buffer.byteLength(raw, 'utf8') > MAX_PATH_BYTES) throw new CORE_INVALID_PATH(`longer than ${MAX_PATH_BYTES} bytes`)
  if (CONTROL.test(raw)) throw new CORE_INVALID_PATH('control character')
  if (raw.includes('\\')) throw new CORE_INVALID_PATH('backslash')
  const segments = raw.split('/')
  for (const segment of segments) {
    if (segment === '') throw new CORE_INVALID_PATH('empty segment')
    if (segment === '.' || segment === '..') throw new CORE_INVALID_PATH('dot segment')
    if (Buffer.byteLength(segment, 'utf8') > MAX_SEGMENT_BYTES) throw new CORE_INVALID_PATH(`segment longer than ${MAX_SEGMENT_BYTES} bytes`)
  }
  return segments
}

/** True when `candidate` is `realBase` itself or lies below it (compared with a trailing separator). */
export function isInside (realBase: string, candidate: string): boolean {
  const base = realBase.endsWith(sep) ? realBase : realBase + sep
  return candidate === realBase || candidate.startsWith(base)
}

const outside = (): Error => new CORE_FORBIDDEN('the path leaves the chat directory')

/**
 * Returns the absolute host path for `segments` below `baseDir`, realpath-resolved as far as it exists.
 * An existing path must resolve strictly inside realpath(baseDir), else CORE_FORBIDDEN (403). For a path
 * that does not exist yet (an upload target), the deepest existing ancestor must be inside and the
 * missing tail is appended verbatim; a dangling symlink in the tail is refused (403). A base dir that
 * does not exist → CORE_PATH_NOT_FOUND (404); a parent that is a file → CORE_PATH_NOT_FOUND.
 */
export async function resolveInside (baseDir: string, segments: string[]): Promise<string> {
  if (segments.length === 0) throw new CORE_INVALID_PATH('empty path')
  let realBase: string
  try { realBase = await realpath(baseDir) } catch (err) {
    if (errnoCode(err) === 'ENOENT') throw new CORE_PATH_NOT_FOUND()
    throw err
  }
  // A concurrent writer may create a missing directory while we look: then resolve again.
  for (let attempt = 0; attempt < 5; attempt++) {
    const resolved = await resolveOnce(realBase, segments)
    if (resolved !== RETRY) return resolved
  }
  throw outside()
}

const RETRY = Symbol('retry')

async function resolveOnce (realBase: string, segments: string[]): Promise<string | typeof RETRY> {
  for (let keep = segments.length; keep >= 0; keep--) {
    let real: string
    try {
      real = await realpath(join(realBase, ...segments.slice(0, keep)))
    } catch (err) {
      const code = errnoCode(err)
      if (code === 'ENOENT') continue
      if (code === 'ENOTDIR') throw new CORE_PATH_NOT_FOUND()
      if (code === 'ELOOP') throw outside()
      throw err
    }
    if (keep === segments.length) {
      if (real === realBase || !isInside(realBase, real)) throw outside()
      return real
    }
    if (!isInside(realBase, real)) throw outside()
    // The next component does not resolve; if it exists at all it is a dangling symlink: refuse it.
    const next = join(real, segments[keep] as string)
    let info: Stats
    try {
      info = await lstat(next)
    } catch (err) {
      const code = errnoCode(err)
      if (code === 'ENOTDIR') throw new CORE_PATH_NOT_FOUND()
      if (code !== 'ENOENT') throw err
      return join(real, ...segments.slice(keep))
    }
    // It appeared after realpath failed: a symlink (dangling or new) is refused, anything else re-resolved.
    if (info.isSymbolicLink()) throw outside()
    return RETRY
  }
  throw outside()
}

/**
 * Opens `absPath` read-only without following a final symlink (O_NOFOLLOW; O_NONBLOCK so a fifo cannot
 * hang the open), then confirms through the descriptor (/proc/self/fd/<n>) that the opened object is a
 * regular file inside realpath(baseDir). Missing → CORE_PATH_NOT_FOUND (404); a directory →
 * CORE_PATH_IS_DIRECTORY (400); a symlink, special file or anything outside → CORE_FORBIDDEN (403).
 * The caller owns (and must close) the returned handle.
 */
export async function openVerified (baseDir: string, absPath: string): Promise<FileHandle> {
  const realBase = await realpath(baseDir).catch((err: unknown) => {
    throw errnoCode(err) === 'ENOENT' ? new CORE_PATH_NOT_FOUND() : err
  })
  let handle: FileHandle
  try {
    handle = await open(absPath, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
  } catch (err) {
    const code = errnoCode(err)
    if (code === 'ENOENT' || code === 'ENOTDIR') throw new CORE_PATH_NOT_FOUND()
    if (code === 'ELOOP' || code === 'ENXIO' || code === 'EACCES') throw outside()
    throw err
  }
  try {
    const info = await handle.stat()
    if (info.isDirectory()) throw new CORE_PATH_IS_DIRECTORY()
    if (!info.isFile()) throw outside()
    const actual = await fdPath(handle, absPath, info)
    if (actual === undefined || actual === realBase || !isInside(realBase, actual)) throw outside()
    return handle
  } catch (err) {
    await handle.close().catch(() => {})
    throw err
  }
}

/** Where the descriptor really points. Without /proc (not Linux) fall back to realpath plus a dev/ino match. */
async function fdPath (handle: FileHandle, absPath: string, info: Stats): Promise<string | undefined> {
  try {
    return await readlink(`/proc/self/fd/${handle.fd}`)
  } catch (err) {
    if (errnoCode(err) !== 'ENOENT') throw err
  }
  const real = await realpath(absPath).catch(() => undefined)
  if (real === undefined) return undefined
  const again = await stat(real).catch(() => undefined)
  return again !== undefined && again.dev === info.dev && again.ino === info.ino ? real : undefined
}

export { walkRegularFiles, walkTree, type WalkEntry, type WalkOptions, type WalkSummary } from './tree-walk.js'
