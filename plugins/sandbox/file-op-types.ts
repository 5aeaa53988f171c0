/* The in-sandbox agent's file operations and socket listing (SandboxService.fileOp, agent-files.ts); re-exported by types.ts. */

/** Extension (docs/contract.md#in-sandbox-agent): a file operation the in-sandbox agent serves as `assistant` (fileOp()). */
export type SandboxFileOp =
  /** stat, following symlinks (`link` says whether the path itself is one) */
  | { op: 'stat', path: string }
  /** at most `max` bytes (≤ 8 MiB) of a regular file from `offset` (negative: from the end) */
  | { op: 'read', path: string, max: number, offset?: number }
  /** atomic replace (temp file + rename, the old file's mode kept, 0644 for a new one); parents created */
  | { op: 'write', path: string, data: Buffer }
  /**
   * the TCP sockets in LISTEN state of the sandbox's network namespace, at most `max` (≤ 4096), from the
   * kernel's socket diagnostics (cheaper than reading /proc/net/tcp, which walks the host's whole
   * connection table); an agent older than this op answers `ok: false`
   */
  | { op: 'listening', max: number }

/** One listening TCP socket (fileOp `listening`): its local address, text in the usual notation. */
export interface ListeningSocket {
  family: 4 | 6
  /** `0.0.0.0`, `127.0.0.1`, `::`, `::1`, `::ffff:127.0.0.1`, … */
  address: string
  port: number
}

export type SandboxFileKind = 'file' | 'dir' | 'fifo' | 'socket' | 'char' | 'block' | 'other'

/** The agent's answer, checked by the driver (the sandbox may lie: kinds, sizes and lengths are validated). */
export interface SandboxFileResult {
  ok: boolean
  /** on failure: the errno (0 when none applies, e.g. `not a regular file`) and the message, ≤ 300 chars */
  errno: number
  error: string
  kind?: SandboxFileKind
  size?: number
  /** permission bits */
  mode?: number
  /** stat: the path itself is a symlink */
  link?: boolean
  /** write: an existing file was replaced */
  existed?: boolean
  /** read: the bytes (never more than asked) */
  data: Buffer
  /** listening: the sockets (never more than asked); `more` when the agent left some out */
  sockets?: ListeningSocket[]
  more?: boolean
  timedOut: boolean
  cancelled: boolean
}
