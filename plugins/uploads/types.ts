import type { Readable } from 'node:stream'

/** One uploaded file as GET /api/uploads/{chat}/list reports it (docs/contract.md#files-and-uploads). */
export interface UploadListEntry {
  /** Base name. */
  name: string
  /** Path relative to the chat's uploads dir, `/`-separated. */
  path: string
  size: number
  /** mtime in Unix seconds (float). */
  modified: number
  /** `/mnt/user-data/uploads/<path>` */
  container_path: string
}

/** A regular file of a chat's uploads, for other plugins (tier 5 resources). */
export interface UploadFile {
  relPath: string
  size: number
  mtimeMs: number
}

export interface SavedUpload {
  /** The normalised relative path. */
  filename: string
  size: number
  md5: string
}

/** After a successful upload; hooks run in registration order and their failures are logged, never thrown. */
export type UploadHook = (event: { chatId: string, file: SavedUpload }) => Promise<void> | void

/**
 * A chat's uploads area (chat storage's `uploads`), bind-mounted read-only at
 * /mnt/user-data/uploads in the sandbox, so a saved file is visible there at once. Errors are coded
 * (UPLOAD_*, CORE_INVALID_PATH, CORE_FORBIDDEN).
 */
export interface UploadService {
  /**
   * Streams `source` to a temporary file next to the target, computing the MD5 on the way, then renames
   * it into place (atomic replace). Creates missing parent directories. Rejects UPLOAD_TOO_LARGE (413;
   * nothing is left behind) beyond the size limit, CORE_INVALID_PATH (400) / CORE_FORBIDDEN (403) for a
   * bad path, UPLOAD_TARGET_IS_DIRECTORY (400), UPLOAD_WRITE_FAILED (500). Then runs the upload hooks.
   */
  save (chatId: string, segments: string[], source: Readable): Promise<SavedUpload>
  /** Regular files (symlinks and special files skipped, hidden files included), unsorted. */
  files (chatId: string): Promise<UploadFile[]>
  /** The list route's entries, newest first. */
  list (chatId: string): Promise<UploadListEntry[]>
  /** `{ relPath: md5 }`; MD5s are cached by (size, mtime, inode) so unchanged files are not re-hashed. */
  manifest (chatId: string): Promise<Record<string, string>>
  /**
   * Reads one upload, verified through its descriptor. Rejects UPLOAD_NOT_FOUND (404) for anything
   * missing, outside, a symlink or not a regular file, and UPLOAD_READ_TOO_LARGE when it exceeds `maxBytes`.
   */
  read (chatId: string, relPath: string, maxBytes: number): Promise<Buffer>
  /** Register while plugins load (tier 5 sends resources/list_changed from here). */
  onUpload (hook: UploadHook): void
}

declare module 'fastify' {
  interface FastifyInstance { uploads: UploadService }
}
