import { Readable } from 'node:stream'
import { ZipFile } from 'yazl'
import type { FastifyBaseLogger } from 'fastify'
import { openVerified, type WalkEntry } from '../../core/safe-path.js'
import { isCompressed } from './mime.js'

/**
 * Streams a zip of `entries` (already walked with lstat, limits checked). yazl pulls one file at a time
 * (addReadStreamLazy), so memory stays flat and at most one descriptor is open. Each file is opened through
 * the fd verification and read only up to the size the walk saw; yazl writes ZIP64 records when needed.
 * A file that fails verification or changes size mid-stream aborts the response (the client sees a
 * truncated download, never foreign content).
 */
export function streamZip (root: string, entries: WalkEntry[], log: FastifyBaseLogger): Readable {
  const zip = new ZipFile()
  const output = zip.outputStream as Readable
  zip.on('error', (err: unknown) => {
    log.warn({ err }, 'archive aborted')
    output.destroy(err instanceof Error ? err : new Error(String(err)))
  })
  for (const entry of entries) {
    const options = { size: entry.size, mtime: new Date(entry.mtimeMs), mode: 0o100644, compress: !isCompressed(entry.relPath) }
    zip.addReadStreamLazy(entry.relPath, options, cb => {
      openVerified(root, entry.absPath).then(handle => {
        if (entry.size === 0) {
          handle.close().catch(() => {})
          cb(null, Readable.from([]))
        } else {
          cb(null, handle.createReadStream({ start: 0, end: entry.size - 1, autoClose: true }))
        }
      }, (err: unknown) => { cb(err, Readable.from([])) })
    })
  }
  zip.end()
  return output
}
