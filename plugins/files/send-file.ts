import type { FileHandle } from 'node:fs/promises'
import { Readable } from 'node:stream'
import type { Stats } from 'node:fs'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { errorBody } from '../../core/errors.js'
import { mimeOf } from '../../core/mime.js'
import { FILES_RANGE_NOT_SATISFIABLE } from './errors.js'
import { contentTypeOf, isActive } from './mime.js'

export interface SendOptions {
  /** CSP frame-ancestors value for active content (FRAME_ANCESTORS). */
  frameAncestors: string
  /** `?download=1`: octet-stream attachment. */
  download: boolean
}

/** `inline|attachment; filename="<ASCII fallback>"; filename*=UTF-8''<percent-encoded>` (docs/contract.md#downloads). */
export function contentDisposition (kind: 'inline' | 'attachment', name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\%]/g, '_')
  const encoded = encodeURIComponent(name).replace(/['()*]/g, c => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
  return `${kind}; filename="${ascii}"; filename*=UTF-8''${encoded}`
}

export function etagOf (info: Stats): string {
  return `"${info.ino.toString(16)}-${info.size.toString(16)}-${Math.floor(info.mtimeMs).toString(16)}"`
}

type Range = { start: number, end: number } | 'unsatisfiable' | undefined

/** One `bytes=` range; several ranges or bad syntax → undefined (the whole file is sent, as RFC 9110 allows). */
export function parseRange (header: string | undefined, size: number): Range {
  if (header === undefined) return undefined
  const m = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header)
  if (m === null) return undefined
  const [, a = '', b = ''] = m
  if (a === '' && b === '') return undefined
  if (a === '') {
    const suffix = Number(b)
    if (suffix === 0 || size === 0) return 'unsatisfiable'
    return { start: Math.max(0, size - suffix), end: size - 1 }
  }
  const start = Number(a)
  const end = b === '' ? size - 1 : Math.min(Number(b), size - 1)
  if (b !== '' && Number(b) < start) return undefined
  if (start >= size) return 'unsatisfiable'
  return { start, end }
}

function notModified (request: FastifyRequest, etag: string, mtimeMs: number): boolean {
  const inm = request.headers['if-none-match']
  if (typeof inm === 'string') {
    return inm.trim() === '*' || inm.split(',').some(tag => tag.trim().replace(/^W\//, '') === etag)
  }
  const ims = request.headers['if-modified-since']
  if (typeof ims !== 'string') return false
  const since = Date.parse(ims)
  return !Number.isNaN(since) && Math.floor(mtimeMs / 1000) * 1000 <= since
}

/** If-Range: the range applies only when the validator still matches. */
function rangeStillValid (request: FastifyRequest, etag: string, mtimeMs: number): boolean {
  const ifRange = request.headers['if-range']
  if (typeof ifRange !== 'string') return true
  if (ifRange.trim().startsWith('"')) return ifRange.trim() === etag
  const date = Date.parse(ifRange)
  return !Number.isNaN(date) && Math.floor(mtimeMs / 1000) * 1000 === date
}

/**
 * Sends an already verified, open file: headers of docs/contract.md#files-and-uploads (type, disposition, nosniff, CSP for active content,
 * validators), conditional GET (304) and a single byte range (206/416). The handle is closed in every case:
 * by the read stream when it ends or is destroyed, here otherwise. Reading happens only through the handle,
 * never by path, so a path swapped after verification cannot change what is sent.
 */
export async function sendVerifiedFile (request: FastifyRequest, reply: FastifyReply, handle: FileHandle, name: string, opts: SendOptions): Promise<FastifyReply> {
  let streaming = false
  try {
    const info = await handle.stat()
    const mime = mimeOf(name)
    const etag = etagOf(info)
    reply.header('X-Content-Type-Options', 'nosniff')
      .header('Cache-Control', 'private, no-cache')
      .header('ETag', etag)
      .header('Last-Modified', new Date(info.mtimeMs).toUTCString())
      .header('Accept-Ranges', 'bytes')
    if (opts.download) {
      reply.header('Content-Type', 'application/octet-stream').header('Content-Disposition', contentDisposition('attachment', name))
    } else {
      reply.header('Content-Type', contentTypeOf(mime)).header('Content-Disposition', contentDisposition('inline', name))
      if (isActive(mime)) {
        reply.header('Content-Security-Policy', `sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads; frame-ancestors ${opts.frameAncestors}`)
      }
    }
    if (notModified(request, etag, info.mtimeMs)) return await reply.code(304).send()
    const range = rangeStillValid(request, etag, info.mtimeMs) ? parseRange(request.headers.range, info.size) : undefined
    if (range === 'unsatisfiable') {
      reply.removeHeader('Content-Disposition')
      reply.removeHeader('Content-Security-Policy')
      return await reply.code(416).header('Content-Range', `bytes */${info.size}`)
        .header('Content-Type', 'application/json; charset=utf-8').send(errorBody(new FILES_RANGE_NOT_SATISFIABLE(info.size)))
    }
    const start = range?.start ?? 0
    const end = range?.end ?? info.size - 1
    if (range !== undefined) reply.code(206).header('Content-Range', `bytes ${start}-${end}/${info.size}`)
    reply.header('Content-Length', String(Math.max(0, end - start + 1)))
    // HEAD: an empty stream, because Fastify's HEAD handler would reset Content-Length for an empty body.
    if (request.method === 'HEAD' || info.size === 0) return await reply.send(Readable.from([]))
    streaming = true
    return await reply.send(handle.createReadStream({ start, end, autoClose: true }))
  } finally {
    if (!streaming) await handle.close().catch(() => {})
  }
}
