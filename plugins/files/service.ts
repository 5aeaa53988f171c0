import { lstat, realpath, type FileHandle } from 'node:fs/promises'
import type { Readable } from 'node:stream'
import { basename } from 'node:path'
import type { FastifyBaseLogger } from 'fastify'
import { chatPaths } from '../../core/chat-paths.js'
import { CORE_PATH_NOT_FOUND, openVerified, resolveInside, walkRegularFiles, type WalkEntry } from '../../core/safe-path.js'
import type { LinkService } from '../capabilities/types.js'
import { FILES_ARCHIVE_TOO_LARGE, FILES_NOTHING_TO_ARCHIVE } from './errors.js'
import { mimeOf, typeClassOf } from './mime.js'
import { streamZip } from './archive.js'
import type { FilesOptions, OutputEntry, OutputsListing } from './schemas.js'

export interface FilesService {
  /** realpath of the chat's outputs dir; undefined when it is missing or is not a real directory. */
  outputsRoot (chatId: string): Promise<string | undefined>
  /** Opens `segments` below outputs with the §6.4 checks (404 / 400 directory / 403 escape). Caller closes. */
  open (chatId: string, segments: string[]): Promise<{ handle: FileHandle, name: string }>
  /** The typed listing of §6.3, newest first, capped. */
  list (chatId: string): Promise<OutputsListing>
  /** Plans the archive (limits → 413, nothing → 404) and returns the zip stream; nothing is read before that. */
  archive (chatId: string): Promise<Readable>
}

export interface FilesDeps { links: LinkService, log: FastifyBaseLogger }

function errnoCode (err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string' ? err.code : undefined
}

export function createFilesService (deps: FilesDeps, opts: Required<FilesOptions>): FilesService {
  const { links, log } = deps

  async function outputsRoot (chatId: string): Promise<string | undefined> {
    const dir = chatPaths(opts.dataDir, chatId).outputs
    try {
      // The outputs dir itself must be a directory, never a symlink to somewhere else.
      const info = await lstat(dir)
      if (!info.isDirectory()) return undefined
      return await realpath(dir)
    } catch (err) {
      if (errnoCode(err) === 'ENOENT' || errnoCode(err) === 'ENOTDIR') return undefined
      throw err
    }
  }

  async function planArchive (root: string): Promise<WalkEntry[]> {
    const entries: WalkEntry[] = []
    let bytes = 0
    for await (const entry of walkRegularFiles(root, { skipDot: true, limit: opts.archiveMaxFiles + 1 })) {
      entries.push(entry)
      bytes += entry.size
      if (entries.length > opts.archiveMaxFiles) throw new FILES_ARCHIVE_TOO_LARGE(`more than ${opts.archiveMaxFiles} files`)
      if (bytes > opts.archiveMaxBytes) throw new FILES_ARCHIVE_TOO_LARGE(`more than ${opts.archiveMaxBytes} bytes`)
    }
    return entries
  }

  return {
    outputsRoot,
    async open (chatId, segments) {
      const root = await outputsRoot(chatId)
      if (root === undefined) throw new CORE_PATH_NOT_FOUND()
      const abs = await resolveInside(root, segments)
      const handle = await openVerified(root, abs)
      return { handle, name: basename(segments[segments.length - 1] as string) }
    },
    async list (chatId) {
      const root = await outputsRoot(chatId)
      const files: OutputEntry[] = []
      let scanned = 0
      if (root !== undefined) {
        for await (const e of walkRegularFiles(root, { skipDot: true, limit: opts.listingScanLimit })) {
          scanned++
          const name = e.relPath.slice(e.relPath.lastIndexOf('/') + 1)
          const mime = mimeOf(name)
          files.push({
            name,
            path: e.relPath,
            size: e.size,
            modified: e.mtimeMs / 1000,
            type: typeClassOf(name, mime),
            mime,
            url: links.filePath(chatId, e.relPath)
          })
        }
      }
      files.sort((a, b) => b.modified - a.modified || (a.path < b.path ? -1 : 1))
      const truncated = files.length > opts.listingMaxEntries || scanned >= opts.listingScanLimit
      const shown = files.slice(0, opts.listingMaxEntries)
      const listing: OutputsListing = { chat_id: chatId, files: shown, total: shown.length, timestamp: Date.now() / 1000 }
      if (truncated) listing.truncated = true
      return listing
    },
    async archive (chatId) {
      const root = await outputsRoot(chatId)
      if (root === undefined) throw new FILES_NOTHING_TO_ARCHIVE()
      const entries = await planArchive(root)
      if (entries.length === 0) throw new FILES_NOTHING_TO_ARCHIVE()
      return streamZip(root, entries, log)
    }
  }
}
