import type { ExecOptions, ExecResult, SandboxFileOp, SandboxFileResult, SandboxService } from '../sandbox/types.js'
import { WORKSPACE_EXEC_TIMEOUT, WORKSPACE_FAILED, WORKSPACE_SANDBOX_STOPPED } from './errors.js'
import { IMAGE_MAX_PIXELS, IMAGE_MAX_SIDE, IMAGE_SCRIPT } from './image-script.js'
import { listingArgv } from './listing.js'
import { shellQuote } from './text.js'

/*
 * File I/O inside the chat's sandbox, always as user `assistant`. Paths travel only as argv elements
 * (after `--`, or as "$1" of a constant script) and content only through stdin/stdout: no user string
 * is ever interpolated into shell text (docs/contract.md#view). When the sandbox runs the
 * in-sandbox agent, stat, reads and writes are its file operations instead (no process spawned); any
 * answer but success or "nothing there" runs the command as well, so errors read exactly the same.
 */

export type FileKind = 'file' | 'dir' | 'fifo' | 'socket' | 'char' | 'block' | 'other'
export interface FileStat { kind: FileKind, size: number }

const KINDS: Record<number, FileKind> = { 0o100000: 'file', 0o040000: 'dir', 0o010000: 'fifo', 0o140000: 'socket', 0o020000: 'char', 0o060000: 'block' }

/** Writes stdin to "$1" atomically: temp file in the same directory, mode of the old file kept, then rename. */
const WRITE_SCRIPT = `
target=$1
if [ -L "$target" ]; then
  resolved=$(readlink -f -- "$target") && [ -n "$resolved" ] && target=$resolved
fi
if [ -d "$target" ]; then echo "cubicle: is a directory" >&2; exit 3; fi
dir=$(dirname -- "$target")
mkdir -p -- "$dir" || exit 4
existed=0
[ -e "$target" ] && existed=1
if ! tmp=$(mktemp -- "$dir/.cubicle-write.XXXXXXXX"); then
  # The directory refuses new files; an existing writable file can still be rewritten in place.
  if [ "$existed" = 1 ] && [ -w "$target" ]; then cat > "$target" || exit 5; echo "$existed"; exit 0; fi
  exit 5
fi
trap 'rm -f -- "$tmp"' EXIT
cat > "$tmp" || exit 5
if [ "$existed" = 1 ]; then chmod --reference="$target" -- "$tmp" 2>/dev/null || true; else chmod 0644 -- "$tmp"; fi
mv -f -- "$tmp" "$target" || exit 5
trap - EXIT
echo "$existed"
`

const PATH_ARG = '\u0000path'
/** listingArgv as shell words: constants quoted, the path as "$1". */
const FIND_WORDS = listingArgv(PATH_ARG).map(a => a === PATH_ARG ? '"$1"' : shellQuote(a)).join(' ')

/**
 * One exec for what view and str_replace need first: `<mode hex> <size>` on the first line, then either
 * the file's first bytes ("$2" when the file fits, else "$4") or, for a directory when "$3" = list, the
 * listing. %f's first hex digit is 8 for regular files and 4 for directories.
 */
const OPEN_SCRIPT = `
info=$(stat -L --printf '%f %s' -- "$1") || exit 2
printf '%s\\n' "$info"
case $info in
  8*) size=\${info#* }
      if [ "$2" -gt 0 ]; then
        if [ "$size" -gt "$2" ]; then exec head -c "$4" -- "$1"; else exec head -c "$2" -- "$1"; fi
      fi ;;
  4*) if [ "$3" = list ]; then exec ${FIND_WORDS}; fi ;;
esac
`

/**
 * The reason part of the last message line: `mkdir: cannot create directory '/x': Permission denied` →
 * `Permission denied`. stderr may hold megabytes from the sandbox: only its last line is looked at.
 */
export function errorReason (stderr: string): string {
  const trimmed = stderr.trimEnd()
  const line = trimmed.slice(trimmed.lastIndexOf('\n') + 1)
  const reason = line.slice(line.lastIndexOf(': ') + 2).trim()
  return reason === '' ? 'unknown error' : reason.slice(0, 300)
}

const LIST_MAX_BYTES = 8 * 1024 * 1024
/** What one agent read returns at most (agent-files.ts AGENT_READ_MAX). */
const AGENT_READ_MAX = 8 * 1024 * 1024
const ENOENT = 2
const ENOTDIR = 20

const isMissing = (stderr: string): boolean => /No such file or directory|Not a directory/.test(stderr)

export interface OpenOptions {
  /** Read a regular file whole when it has at most this many bytes (0: do not read). */
  readBytes: number
  /** Bytes to read from the start of a larger file. */
  partBytes?: number
  /** List a directory (listingArgv). */
  list?: boolean
}

export interface Opened extends FileStat {
  /** The file's first bytes (regular files, when asked). */
  content: Buffer
  /** The listing output (directories, when asked) and whether it was cut by the output cap. */
  listing?: { out: string, incomplete: boolean }
}

export interface SandboxFiles {
  /**
   * stat + read (or list) in one exec. undefined when nothing exists at path (a dangling symlink
   * counts as missing); rejects WORKSPACE_FAILED when it exists but cannot be read.
   */
  open (path: string, opts: OpenOptions): Promise<Opened | undefined>
  readTail (path: string, bytes: number): Promise<Buffer>
  /** Lines start..stop (1-based, inclusive) through sed, at most maxBytes of them. */
  readLines (path: string, start: number, stop: number, maxBytes: number): Promise<Buffer>
  /** Number of newline characters (wc -l). */
  countNewlines (path: string): Promise<number>
  /** Returns true when an existing file was replaced. Rejects WORKSPACE_FAILED with the reason. */
  write (path: string, content: Buffer): Promise<boolean>
  convertImage (path: string): Promise<ExecResult>
}

export interface SandboxFilesDeps {
  sandbox: SandboxService
  chatId: string
  signal: AbortSignal
  timeoutS: number
}

export function createSandboxFiles ({ sandbox, chatId, signal, timeoutS }: SandboxFilesDeps): SandboxFiles {
  const run = async (what: string, argv: string[], opts: ExecOptions = {}): Promise<ExecResult> => {
    const result = await sandbox.exec(chatId, argv, {
      ...opts,
      env: { LC_ALL: 'C.UTF-8' },
      timeoutMs: timeoutS * 1000,
      signal
    })
    if (result.cancelled) throw new WORKSPACE_FAILED(`${what} was cancelled`)
    if (result.timedOut) throw new WORKSPACE_EXEC_TIMEOUT(what, timeoutS)
    if (result.exitCode === null) throw new WORKSPACE_SANDBOX_STOPPED(what)
    return result
  }

  /** The agent's answer (undefined: it cannot serve the call, run the command). */
  const ask = async (what: string, op: SandboxFileOp): Promise<SandboxFileResult | undefined> => {
    const r = await sandbox.fileOp?.(chatId, op, { timeoutMs: timeoutS * 1000, signal })
    if (r?.cancelled === true) throw new WORKSPACE_FAILED(`${what} was cancelled`)
    if (r?.timedOut === true) throw new WORKSPACE_EXEC_TIMEOUT(what, timeoutS)
    return r
  }
  const missing = (r: SandboxFileResult): boolean => !r.ok && (r.errno === ENOENT || r.errno === ENOTDIR)

  /**
   * open() through the agent: one read of a regular file (a stat when nothing is to be read). A path
   * that is not a regular file is stat'ed for its kind; directories to list, and every failure but
   * "nothing there", go the exec way (undefined).
   */
  const agentOpen = async (path: string, opts: OpenOptions): Promise<Opened | 'missing' | undefined> => {
    // One agent read is ≤ 8 MiB: enough for the whole of a file up to that size, or for the first part
    // of a file beyond readBytes; a file between the two goes the exec way.
    const want = opts.readBytes > 0 ? Math.min(Math.max(opts.readBytes, opts.partBytes ?? 0), AGENT_READ_MAX) : 0
    if ((opts.partBytes ?? 0) > AGENT_READ_MAX) return undefined
    let r = await ask('read', want > 0 ? { op: 'read', path, max: want } : { op: 'stat', path })
    if (r === undefined) return undefined
    if (missing(r)) return 'missing'
    const notRegular = !r.ok && r.errno === 0 && r.kind !== undefined && r.kind !== 'file'
    if (notRegular) r = await ask('read', { op: 'stat', path })
    if (r === undefined || !r.ok) return undefined
    const kind = r.kind ?? 'other'
    const size = r.size ?? 0
    if (kind === 'dir' && opts.list === true) return undefined
    if (kind !== 'file' || want === 0) return { kind, size, content: Buffer.alloc(0) }
    if (notRegular) return undefined // it became a regular file between the two answers
    if (size <= opts.readBytes && size > AGENT_READ_MAX) return undefined
    return { kind, size, content: size > opts.readBytes ? r.data.subarray(0, opts.partBytes ?? 0) : r.data.subarray(0, opts.readBytes) }
  }

  const read = async (path: string, argv: string[], bytes: number): Promise<Buffer> => {
    const result = await run('read', argv, { maxBytes: bytes })
    if (result.exitCode !== 0) {
      const stderr = result.stderr.toString('utf8')
      if (isMissing(stderr)) throw new WORKSPACE_FAILED(`path not found: ${path}`)
      throw new WORKSPACE_FAILED(`cannot read ${path}: ${errorReason(stderr)}`)
    }
    return result.stdout
  }

  return {
    async open (path, opts) {
      const viaAgent = await agentOpen(path, opts)
      if (viaAgent === 'missing') return undefined
      if (viaAgent !== undefined) return viaAgent
      const maxBytes = Math.max(opts.readBytes, opts.partBytes ?? 0, opts.list === true ? LIST_MAX_BYTES : 0) + 64
      const argv = ['sh', '-c', OPEN_SCRIPT, 'sh', path, String(opts.readBytes), opts.list === true ? 'list' : '-', String(opts.partBytes ?? 0)]
      const result = await run('read', argv, { maxBytes })
      const stderr = result.stderr.toString('utf8')
      const nl = result.stdout.indexOf(0x0a)
      if (result.exitCode === 2 || nl === -1) {
        if (isMissing(stderr)) return undefined
        throw new WORKSPACE_FAILED(`cannot access ${path}: ${errorReason(stderr)}`)
      }
      const [mode, size] = result.stdout.subarray(0, nl).toString('utf8').split(' ')
      const kind = KINDS[parseInt(mode ?? '0', 16) & 0o170000] ?? 'other'
      const body = result.stdout.subarray(nl + 1)
      if (kind === 'dir' && opts.list === true) {
        // find exits 1 when some entries were unreadable but still prints the rest.
        if (result.exitCode !== 0 && body.length === 0 && stderr !== '') throw new WORKSPACE_FAILED(`cannot list ${path}: ${errorReason(stderr)}`)
        return { kind, size: Number(size) || 0, content: Buffer.alloc(0), listing: { out: body.toString('utf8'), incomplete: result.truncated } }
      }
      if (result.exitCode !== 0) throw new WORKSPACE_FAILED(`cannot read ${path}: ${errorReason(stderr)}`)
      return { kind, size: Number(size) || 0, content: body }
    },
    async readTail (path, bytes) {
      const r = bytes <= AGENT_READ_MAX ? await ask('read', { op: 'read', path, max: bytes, offset: -bytes }) : undefined
      if (r?.ok === true && r.kind === 'file') return r.data
      return await read(path, ['tail', '-c', String(bytes), '--', path], bytes)
    },
    // Only integers reach the sed script; the path is "$1".
    readLines: async (path, start, stop, maxBytes) => await read(path,
      ['sh', '-c', 'sed -n "$2,$3p;$3q" -- "$1" | head -c "$4"', 'sh', path, String(start), String(stop), String(maxBytes)], maxBytes),
    async countNewlines (path) {
      const out = await read(path, ['wc', '-l', '--', path], 64 * 1024)
      return parseInt(out.toString('utf8').trim(), 10) || 0
    },
    async write (path, content) {
      const r = await ask('write', { op: 'write', path, data: content })
      if (r?.ok === true && r.existed !== undefined) return r.existed
      const result = await run('write', ['sh', '-c', WRITE_SCRIPT, 'sh', path], { stdin: content, maxBytes: 64 * 1024 })
      if (result.exitCode === 0) return result.stdout.toString('utf8').trim() === '1'
      const stderr = result.stderr.toString('utf8')
      if (result.exitCode === 3) throw new WORKSPACE_FAILED(`${path} is a directory; give a file path`)
      throw new WORKSPACE_FAILED(`cannot write ${path}: ${errorReason(stderr)}`)
    },
    convertImage: async path => await run('image conversion',
      ['python3', '-c', IMAGE_SCRIPT, path, String(IMAGE_MAX_PIXELS), String(IMAGE_MAX_SIDE)], { maxBytes: 16 * 1024 * 1024 })
  }
}
