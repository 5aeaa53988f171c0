import type { FileHandle } from 'node:fs/promises'
import type { Writable } from 'node:stream'
import type { WalkEntry, WalkOptions, WalkSummary } from '../../core/tree-walk.js'
import type { TreeLimits, TreeUsage } from './usage.js'

export type { WalkEntry, WalkOptions, WalkSummary } from '../../core/tree-walk.js'
export type { TreeLimits, TreeUsage } from './usage.js'

/**
 * The two file areas of a chat that its sandbox sees (docs/contract.md#sandbox-layout): `uploads` (the human's files,
 * read-only in the sandbox) and `outputs` (written by the sandbox, so hostile: it may plant symlinks,
 * fifos or odd names there at any moment).
 */
export type ChatArea = 'uploads' | 'outputs'

/** What writeAtomic leaves behind: the committed file's size and identity (inode, mtime). */
export interface WrittenFile { size: number, mtimeMs: number, ino: number }

export interface StateWriteOptions {
  /** The serialised text may have at most this many bytes, else CHAT_STORAGE_TOO_LARGE and nothing changes. */
  maxBytes: number
  /** File mode (default 0644). */
  mode?: number
  /**
   * false: no fsync before the rename (still atomic: readers see the old or the new content; a power cut may
   * lose the write). For records written on a latency-sensitive path; default true.
   */
  sync?: boolean
}

/**
 * A directory of small state files written by the server only (a chat's meta.json and egress.json, the
 * OAuth keys and state). Names are plain file names (`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`, no `..`),
 * else CHAT_STORAGE_BAD_NAME. Reads go through a descriptor opened without following symlinks, so a
 * file replaced by a symlink, a fifo or a directory is refused (CHAT_STORAGE_NOT_REGULAR), never followed.
 */
export interface StateFiles {
  /** The file's text; null when it does not exist. Rejects CHAT_STORAGE_TOO_LARGE beyond `maxBytes` (nothing is read past it). */
  read (name: string, maxBytes: number): Promise<string | null>
  /** read() then JSON.parse (a SyntaxError for bad JSON). */
  readJson (name: string, maxBytes: number): Promise<unknown>
  /**
   * Atomic replace: a fresh temporary file in the same directory (O_EXCL, O_NOFOLLOW), fsync, rename.
   * Creates the directory (see `ensure`). A symlink in the file's place is replaced, never followed.
   * Readers see the old or the new content, never a mix.
   */
  write (name: string, text: string, opts: StateWriteOptions): Promise<void>
  /** JSON.stringify(value, null, 2) plus a newline, then write(). */
  writeJson (name: string, value: unknown, opts: StateWriteOptions): Promise<void>
  /**
   * Names of the regular files in the directory, at most `limit` (symlinks, directories, fifos and names
   * that are not plain file names left out, never followed); [] when the directory does not exist.
   * Rejects CHAT_STORAGE_NOT_DIRECTORY when the directory is a symlink or not a directory.
   */
  list (limit: number): Promise<string[]>
  /** Removes the file; absent is fine. */
  remove (name: string): Promise<void>
  /** Renames a bad file to `<name>.corrupt-<suffix>` so it is kept for the operator and never overwritten. */
  quarantine (name: string, suffix: string): Promise<void>
  /** Creates the directory and its missing parents (idempotent); it must then be a real directory. */
  ensure (): Promise<void>
}

/** The chat's meta record (`meta.json`, docs/contract.md#creation): who last used the chat and when; never a secret. */
export interface ChatMeta {
  chat_id: string
  user_email: string | null
  user_name: string | null
  mcp_servers: string[]
  created_at: string
  last_active_at: string
  image: string
}

/**
 * Where chat data lives and the only code that knows the layout below DATA_DIR (docs/contract.md#derived-names):
 * `chats/{K}/{uploads,outputs,meta.json,<state>.json}` with K = sha256(chat id)[0:32] (the raw id never
 * appears in a path) and server-wide state directories such as `oauth/`. Every operation that touches a
 * file the sandbox can write goes by descriptor (core/safe-path.ts, core/tree-walk.ts). Consumers never
 * build a DATA_DIR path; another engine (a Kubernetes volume, object storage) replaces this plugin.
 * Chat ids are assumed valid (core/chat-id.ts); errors are coded (CHAT_STORAGE_*, CORE_INVALID_PATH 400,
 * CORE_FORBIDDEN 403, CORE_PATH_NOT_FOUND 404, CORE_PATH_IS_DIRECTORY 400).
 */
export interface ChatStorageService {
  /** The chat's key K (what logs and paths carry instead of the id). */
  key (chatId: string): string
  /**
   * Creates `chats/{K}` (0755), `uploads` (0755) and `outputs` (0750), fixing the modes of existing ones.
   * Giving outputs to the sandbox user is the sandbox engine's (engine.giveOutputs, docs/engine.md#storage).
   */
  prepare (chatId: string): Promise<void>
  /** Creates the area (and the chat's directory) when missing, 0755; modes of existing directories are kept. */
  ensureArea (chatId: string, area: ChatArea): Promise<void>
  /**
   * The area's directory resolved (realpath), for walkers that work below one verified root; undefined when
   * it is missing or is not a real directory (a symlink in its place counts as missing).
   */
  areaRoot (chatId: string, area: ChatArea): Promise<string | undefined>
  /**
   * The area's regular files by descriptor (core/tree-walk.ts): symlinks and special files skipped, never
   * followed, even while the sandbox swaps directories. The generator returns a WalkSummary.
   */
  walk (chatId: string, area: ChatArea, opts?: WalkOptions): AsyncGenerator<WalkEntry, WalkSummary, undefined>
  /**
   * The area's change clock (core/change-clock.ts): a time (as fs.Stats.ctimeMs) such that every change
   * made to the area's files after this resolves gets a ctime, and a walk with `changeTimes` a `changedMs`,
   * at least as late. Read by touching a marker file in the chat's directory (`.change-clock`, the server's)
   * with no thread-pool round trip. undefined when it cannot tell: DATA_DIR not on a local file system
   * (a network one stamps with another machine's clock), the area missing or on another device.
   */
  changeClock (chatId: string, area: ChatArea): Promise<number | undefined>
  /**
   * Opens the regular file at `segments` (already split by core's parseRelPath) read-only, checked through
   * its descriptor to lie inside the area. CORE_PATH_NOT_FOUND (also when the area is missing),
   * CORE_PATH_IS_DIRECTORY, CORE_FORBIDDEN (symlink, special file, escape). The caller closes the handle.
   */
  open (chatId: string, area: ChatArea, segments: string[]): Promise<FileHandle>
  /** Opens a file a walk() of the same area just reported (by its absPath), with the same checks as open(). */
  openWalked (chatId: string, area: ChatArea, entry: Pick<WalkEntry, 'absPath'>): Promise<FileHandle>
  /**
   * Writes `segments` of the area atomically: creates the area and missing parents (0755), hands `write`
   * a stream to a fresh temporary file next to the target (O_EXCL, O_NOFOLLOW, `mode`, default 0644; named
   * `.upload-<uuid>.part`, a hidden name listings skip), then renames it into place. On any failure the temporary file is removed and the error rethrown as is.
   * Rejects CORE_INVALID_PATH/CORE_FORBIDDEN for a bad or escaping path, CHAT_STORAGE_IS_DIRECTORY when
   * the target is a directory; `write` is then never called.
   */
  writeAtomic (chatId: string, area: ChatArea, segments: string[], write: (out: Writable) => Promise<void>, opts?: { mode?: number }): Promise<WrittenFile>
  /**
   * The chat's meta record; null when it has none or it is unreadable (larger than 64 KiB, not JSON, not a
   * regular file, not the record's shape). `readMetaOfKey`: by key, for reapers that found it in chatKeys().
   */
  readMeta (chatId: string): Promise<ChatMeta | null>
  readMetaOfKey (key: string): Promise<ChatMeta | null>
  /** Replaces the chat's meta record atomically (state-file write: O_EXCL temporary file, fsync, rename). */
  writeMeta (chatId: string, meta: ChatMeta): Promise<void>
  /** The chat's own state files (`meta.json`, `egress.json`, …), beside its areas and outside every sandbox mount. */
  chatState (chatId: string): StateFiles
  /**
   * A server-wide state directory below DATA_DIR, e.g. `oauth` or `oauth/state` (segments of
   * `[a-z0-9-]`, else CHAT_STORAGE_BAD_NAME; `chats` is refused). Created with `dirMode` (default 0700).
   */
  serverState (scope: string, opts?: { dirMode?: number }): StateFiles
  /**
   * Bytes the area takes on disk (allocated blocks, hard links once), walked by descriptor without following
   * links and bounded by `limits` (past a bound a lower bound, `complete: false`); 0 when it does not exist.
   * The sandbox core's disk watchdog measures outputs with it.
   */
  usage (chatId: string, area: ChatArea, limits: TreeLimits): Promise<TreeUsage>
  /** The state files of the chat with key `key` (chatState by key, for passes that found the key in a sandbox's name). */
  chatStateOfKey (key: string): StateFiles
  /**
   * A warm pool slot's areas (docs/engine.md#storage): like prepare() for a sandbox no chat has claimed yet
   * (`pool/<slot>/{uploads,outputs}`). A slot id is 12 or 32 lowercase hex digits, else CHAT_STORAGE_BAD_NAME.
   */
  prepareSlot (slot: string): Promise<void>
  /** The slot's state files (the warm pool's claim journal), beside its areas. */
  slotState (slot: string): StateFiles
  /** Whether the slot's areas still exist (a claim that has not given them to a chat yet). */
  hasSlot (slot: string): Promise<boolean>
  /**
   * After the engine claimed the slot's sandbox for a chat: the slot's uploads and outputs become the chat's,
   * what the chat already had (uploads sent before its first call) moved into them; the running sandbox keeps
   * seeing them (the local engine renames the directories: its mounts follow the inodes). Idempotent.
   */
  adoptSlot (slot: string, chatId: string): Promise<void>
  /** Deletes the slot's areas and state. Idempotent. */
  purgeSlot (slot: string): Promise<void>
  /** Keys of the chats that have data (at most `limit`, default 100,000), for reapers. */
  chatKeys (limit?: number): Promise<string[]>
  /** Deletes everything the chat has stored (areas and state). Idempotent. */
  purge (chatId: string): Promise<void>
  /** purge() by key, for reapers that found the key in chatKeys(); a non-key → CHAT_STORAGE_BAD_NAME. */
  purgeKey (key: string): Promise<void>
}

declare module 'fastify' {
  interface FastifyInstance { chatStorage: ChatStorageService }
}
