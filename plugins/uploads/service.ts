import { createHash } from 'node:crypto'
import { basename } from 'node:path'
import { Transform, type Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type { FastifyBaseLogger } from 'fastify'
import QuickLRU from 'quick-lru'
import { SANDBOX_UPLOADS } from '../../core/chat-paths.js'
import { parseRelPath } from '../../core/safe-path.js'
import type { ChatStorageService, WrittenFile } from '../chat-storage/types.js'
import * as coreErrors from '../../core/errors.js'
import { isOneOf } from '../../core/errors.js'
import * as uploadErrors from './errors.js'
import { tooLarge, UPLOAD_NOT_FOUND, UPLOAD_READ_TOO_LARGE, UPLOAD_TARGET_IS_DIRECTORY, UPLOAD_TOO_LARGE, UPLOAD_WRITE_FAILED } from './errors.js'
import type { SavedUpload, UploadFile, UploadHook, UploadListEntry, UploadService } from './types.js'

export interface UploadsDeps { log: FastifyBaseLogger, storage: ChatStorageService }
export interface UploadsServiceOptions { maxBytes: number, maxFiles: number, manifestCacheChats: number }

/** In-progress uploads: hidden, unique, and never reported as uploads themselves. */
// The name chatStorage.writeAtomic gives its temporary files.
const TEMP = /^\.upload-[0-9a-f-]{36}\.part$/
const isTemp = (relPath: string): boolean => TEMP.test(basename(relPath))

interface HashEntry { size: number, mtimeMs: number, ino: number, md5: string }

/** Counts and hashes bytes as they pass; fails the stream once the limit is crossed. */
function meter (limit: number, hash: ReturnType<typeof createHash>): Transform & { bytes: number } {
  const t = new Transform({
    transform (chunk: Buffer, _enc, done) {
      t.bytes += chunk.length
      if (t.bytes > limit) { done(tooLarge(limit)); return }
      hash.update(chunk)
      done(null, chunk)
    }
  }) as Transform & { bytes: number }
  t.bytes = 0
  return t
}

export function createUploadsService (deps: UploadsDeps, opts: UploadsServiceOptions): UploadService {
  const { log, storage } = deps
  const hooks: UploadHook[] = []
  // Per chat: relPath → md5 of one file version (size, mtime, inode). Bounded by chats and, per chat, by maxFiles.
  const hashes = new QuickLRU<string, Map<string, HashEntry>>({ maxSize: opts.manifestCacheChats })

  function remember (chatId: string, relPath: string, entry: HashEntry): void {
    let map = hashes.get(chatId)
    if (map === undefined) hashes.set(chatId, map = new Map())
    map.set(relPath, entry)
  }

  /** The error save() answers: path errors as they are, everything else of the write as UPLOAD_*. */
  function saveError (err: unknown, started: boolean, source: Readable): unknown {
    const code = (err as { code?: string }).code
    if (code === 'CHAT_STORAGE_IS_DIRECTORY') return new UPLOAD_TARGET_IS_DIRECTORY()
    if (!started) {
      if (isOneOf(err, coreErrors)) return err // bad or escaping path: 400/403/404
      source.resume() // the temporary file could not be made: drain the body
      return new UPLOAD_WRITE_FAILED({ cause: err })
    }
    // @fastify/multipart's own error at its fileSize limit
    if (err instanceof UPLOAD_TOO_LARGE || code === 'FST_REQ_FILE_TOO_LARGE') return tooLarge(opts.maxBytes)
    if (isOneOf(err, uploadErrors)) return err
    return new UPLOAD_WRITE_FAILED({ cause: err })
  }

  async function save (chatId: string, segments: string[], source: Readable): Promise<SavedUpload> {
    const hash = createHash('md5')
    const counter = meter(opts.maxBytes, hash)
    let started = false
    let info: WrittenFile
    try {
      // Streamed to a temporary file next to the target, renamed into place (chat storage).
      info = await storage.writeAtomic(chatId, 'uploads', segments, async out => {
        started = true
        await pipeline(source, counter, out)
        // A truncating source (busboy at its fileSize limit) ends normally: treat it as too large too.
        if ((source as { truncated?: boolean }).truncated === true) throw tooLarge(opts.maxBytes)
      }, { mode: 0o644 })
    } catch (err) { throw saveError(err, started, source) }
    const file = { filename: segments.join('/'), size: counter.bytes, md5: hash.digest('hex') }
    remember(chatId, file.filename, { size: info.size, mtimeMs: info.mtimeMs, ino: info.ino, md5: file.md5 })
    await runHooks(chatId, file)
    return file
  }

  async function runHooks (chatId: string, file: SavedUpload): Promise<void> {
    for (const hook of hooks) {
      try { await hook({ chatId, file }) } catch (err) { log.error({ err, chatId }, 'upload hook failed') }
    }
  }

  async function walk (chatId: string): Promise<Array<UploadFile & { absPath: string, ino: number }>> {
    const out: Array<UploadFile & { absPath: string, ino: number }> = []
    for await (const e of storage.walk(chatId, 'uploads', { limit: opts.maxFiles + 1 })) {
      if (isTemp(e.relPath)) continue
      if (out.length >= opts.maxFiles) { log.warn({ chatId, maxFiles: opts.maxFiles }, 'uploads listing cut at maxFiles'); break }
      out.push(e)
    }
    return out
  }

  async function md5Of (chatId: string, absPath: string): Promise<string | undefined> {
    let handle
    try { handle = await storage.openWalked(chatId, 'uploads', { absPath }) } catch { return undefined }
    try {
      const hash = createHash('md5')
      for await (const chunk of handle.createReadStream()) hash.update(chunk as Buffer)
      return hash.digest('hex')
    } catch (err) {
      log.warn({ err, chatId }, 'could not hash an upload')
      return undefined
    } finally { await handle.close().catch(() => {}) }
  }

  async function manifest (chatId: string): Promise<Record<string, string>> {
    const known = hashes.get(chatId) ?? new Map<string, HashEntry>()
    const fresh = new Map<string, HashEntry>()
    const out: Record<string, string> = {}
    for (const f of await walk(chatId)) {
      const cached = known.get(f.relPath)
      let md5 = cached !== undefined && cached.size === f.size && cached.mtimeMs === f.mtimeMs && cached.ino === f.ino ? cached.md5 : undefined
      md5 ??= await md5Of(chatId, f.absPath)
      if (md5 === undefined) continue // vanished or replaced by something we do not read
      fresh.set(f.relPath, { size: f.size, mtimeMs: f.mtimeMs, ino: f.ino, md5 })
      out[f.relPath] = md5
    }
    hashes.set(chatId, fresh)
    return out
  }

  async function read (chatId: string, relPath: string, maxBytes: number): Promise<Buffer> {
    let handle
    try {
      handle = await storage.open(chatId, 'uploads', parseRelPath(relPath))
    } catch (err) {
      if (typeof (err as { statusCode?: number }).statusCode === 'number') throw new UPLOAD_NOT_FOUND()
      throw err
    }
    try {
      const { size } = await handle.stat()
      if (size > maxBytes) throw new UPLOAD_READ_TOO_LARGE(size, maxBytes)
      const data = await handle.readFile()
      if (data.length > maxBytes) throw new UPLOAD_READ_TOO_LARGE(data.length, maxBytes)
      return data
    } finally { await handle.close().catch(() => {}) }
  }

  return {
    save,
    async files (chatId) {
      return (await walk(chatId)).map(({ relPath, size, mtimeMs }) => ({ relPath, size, mtimeMs }))
    },
    async list (chatId) {
      const entries: UploadListEntry[] = (await walk(chatId)).map(f => ({
        name: basename(f.relPath),
        path: f.relPath,
        size: f.size,
        modified: f.mtimeMs / 1000,
        container_path: `${SANDBOX_UPLOADS}/${f.relPath}`
      }))
      return entries.sort((a, b) => b.modified - a.modified || (a.path < b.path ? -1 : 1))
    },
    manifest,
    read,
    onUpload (hook) { hooks.push(hook) }
  }
}
