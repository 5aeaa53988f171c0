import { extensionOf } from '../../core/mime.js'

/*
 * How served files are treated by content type (docs/contract.md#files-and-uploads): charset, the sandbox CSP for active
 * types, stored-not-deflated in the archive, and the listing's type classes. The MIME table is core/mime.ts.
 */
/** Served inline, these could run script; they get the sandbox CSP (docs/contract.md#downloads). */
const ACTIVE = new Set(['text/html', 'application/xhtml+xml', 'image/svg+xml', 'text/xml', 'application/xml'])
/** Text-like types that get `; charset=utf-8`. */
const TEXTUAL = /^(text\/|application\/(json|xml|xhtml\+xml|javascript)$|image\/svg\+xml$)/

/** Extensions whose content is already compressed: stored, not deflated, in the archive. */
const COMPRESSED = new Set(['png', 'jpg', 'jpeg', 'gif', 'webp', 'avif', 'mp3', 'm4a', 'aac', 'ogg', 'oga', 'opus', 'flac',
  'mp4', 'webm', 'mkv', 'mov', 'avi', 'ogv', 'zip', 'gz', 'tgz', 'bz2', 'xz', '7z', 'rar', 'zst', 'docx', 'xlsx', 'pptx',
  'odt', 'ods', 'woff', 'woff2', 'epub', 'pdf'])

const CLASSES: Array<[string, string[]]> = [
  ['html', ['html', 'htm']],
  ['image', ['png', 'jpg', 'jpeg', 'gif', 'webp', 'svg', 'bmp', 'ico']],
  ['audio', ['mp3', 'wav', 'ogg', 'flac', 'm4a', 'aac', 'wma']],
  ['video', ['mp4', 'webm', 'mkv', 'mov', 'avi']],
  ['pdf', ['pdf']],
  ['markdown', ['md', 'markdown']],
  ['spreadsheet', ['csv', 'tsv']],
  ['docx', ['docx']],
  ['xlsx', ['xlsx', 'xls']],
  ['pptx', ['pptx']],
  ['drawio', ['drawio']],
  ['code', ['py', 'js', 'ts', 'jsx', 'tsx', 'css', 'json', 'yaml', 'yml', 'toml', 'sh', 'bash', 'sql', 'go', 'rs', 'java', 'c',
    'cpp', 'h', 'hpp', 'rb', 'php', 'swift', 'kt', 'scala', 'r', 'm', 'vue', 'svelte', 'xml', 'dockerfile']],
  ['text', ['txt', 'log', 'ini', 'cfg', 'conf', 'env']]
]
const CLASS_BY_EXT = new Map<string, string>()
for (const [type, exts] of CLASSES) for (const ext of exts) if (!CLASS_BY_EXT.has(ext)) CLASS_BY_EXT.set(ext, type)

/** The Content-Type header value: text types get `; charset=utf-8`. */
export function contentTypeOf (mime: string): string {
  return TEXTUAL.test(mime) ? `${mime}; charset=utf-8` : mime
}

export function isActive (mime: string): boolean { return ACTIVE.has(mime) }

export function isCompressed (name: string): boolean { return COMPRESSED.has(extensionOf(name)) }

/** The listing's `type` (docs/contract.md#outputs-listing): extension first, then the MIME prefix, else `other`. */
export function typeClassOf (name: string, mime: string): string {
  const byExt = CLASS_BY_EXT.get(extensionOf(name))
  if (byExt !== undefined) return byExt
  const prefix = /^(image|audio|video|text)\//.exec(mime)
  return prefix !== null ? prefix[1] as string : 'other'
}
