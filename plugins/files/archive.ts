import { pipeline, Readable, Transform } from 'node:stream'
import { ZipFile } from 'yazl'
import type { FastifyBaseLogger } from 'fastify'
import { openVerified, type WalkEntry } from '../../core/safe-path.js'
import { isCompressed } from './mime.js'
import { ZipNames } from './zip-names.js'

export interface ZipOptions {
  log: FastifyBaseLogger
  /** Length of one watchdog window in milliseconds. */
  stallMs: number
  /** A reader that takes less than this per second over a window, while data waits for it, is cut off. */
  minBytesPerSecond: number
  /** Runs once when the stream is finished, failed or destroyed (releases the archive slots). */
  onClose: () => void
}

/**
 * Streams a zip of `entries` (already walked with lstat, limits checked). yazl pulls one file at a time
 * (addReadStreamLazy), so memory stays flat and at most one descriptor is open; that descriptor is closed
 * as soon as the stream ends for any reason (a client that goes away does not leave it to the GC). Each
 * file is opened through the fd verification and read only up to the size the walk saw; yazl writes ZIP64
 * records when needed. A file that fails verification or changes size mid-stream aborts the response (the
 * client sees a truncated download, never foreign content). A name yazl would refuse or rewrite is renamed
 * (zip-names.ts); an entry yazl still refuses is left out and logged, never a failed archive.
 */
export function streamZip (root: string, entries: WalkEntry[], opts: ZipOptions): Readable {
  const zip = new ZipFile()
  const output = zip.outputStream as Readable
  const state: StreamState = { closed: false, current: undefined }
  zip.on('error', (err: unknown) => {
    if (!state.closed) opts.log.warn({ err }, 'archive aborted')
    output.destroy(err instanceof Error ? err : new Error(String(err)))
  })
  addEntries(zip, root, entries, state, opts.log)
  zip.end()
  const { meter, stop } = watchdog(opts)
  meter.once('close', () => {
    state.closed = true
    stop()
    state.current?.destroy()
    opts.onClose()
  })
  pipeline(output, meter, () => {})
  return meter
}

interface StreamState {
  /** The response is gone: open nothing more. */
  closed: boolean
  /** The file being read now (closed with the response). */
  current: Readable | undefined
}

function addEntries (zip: ZipFile, root: string, entries: WalkEntry[], state: StreamState, log: FastifyBaseLogger): void {
  const names = new ZipNames()
  for (const entry of entries) names.reserve(entry.relPath)
  let skipped = 0
  for (const entry of entries) {
    const options = { size: entry.size, mtime: new Date(entry.mtimeMs), mode: 0o100644, compress: !isCompressed(entry.relPath) }
    try {
      zip.addReadStreamLazy(names.name(entry.relPath), options, cb => {
        openVerified(root, entry.absPath).then(handle => {
          if (state.closed || entry.size === 0) {
            handle.close().catch(() => {})
            cb(state.closed ? new Error('archive closed') : null, Readable.from([]))
            return
          }
          state.current = handle.createReadStream({ start: 0, end: entry.size - 1, autoClose: true })
          cb(null, state.current)
        }, (err: unknown) => { cb(err, Readable.from([])) })
      })
    } catch (err) {
      skipped++
      log.warn({ err }, 'archive entry left out')
    }
  }
  if (names.renamed > 0 || skipped > 0) log.info({ renamed: names.renamed, skipped }, 'archive entries renamed or left out')
}

/** A pass-through that counts bytes and destroys itself when the reader stalls (see ZipOptions). */
function watchdog (opts: ZipOptions): { meter: Transform, stop: () => void } {
  let moved = 0
  let seen = 0
  const meter = new Transform({
    transform (chunk: Buffer, _encoding, done) {
      moved += chunk.length
      done(null, chunk)
    }
  })
  const minPerWindow = opts.minBytesPerSecond * opts.stallMs / 1000
  const timer = setInterval(() => {
    const progress = moved - seen
    seen = moved
    // Data waiting in our buffer means the reader, not the disk, is the slow side.
    if (progress < minPerWindow && meter.readableLength > 0) {
      opts.log.warn({ bytes: moved, windowMs: opts.stallMs }, 'archive reader too slow; aborting the download')
      meter.destroy(new Error('archive reader stalled'))
    }
  }, opts.stallMs).unref()
  return { meter, stop: () => { clearInterval(timer) } }
}
