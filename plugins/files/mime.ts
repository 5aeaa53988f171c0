/*
 * Content types by extension and the listing's type classes (surface.md §6.3). A fixed table rather than a
 * MIME library: what we serve inline, and with which charset, is a security decision we want in one place.
 */
const MIME: Record<string, string> = {
  html: 'text/html',
  htm: 'text/html',
  xhtml: 'application/xhtml+xml',
  svg: 'image/svg+xml',
  xml: 'application/xml',
  css: 'text/css',
  js: 'text/javascript',
  mjs: 'text/javascript',
  cjs: 'text/javascript',
  json: 'application/json',
  map: 'application/json',
  txt: 'text/plain',
  log: 'text/plain',
  ini: 'text/plain',
  cfg: 'text/plain',
  conf: 'text/plain',
  env: 'text/plain',
  md: 'text/markdown',
  markdown: 'text/markdown',
  csv: 'text/csv',
  tsv: 'text/tab-separated-values',
  yaml: 'text/yaml',
  yml: 'text/yaml',
  toml: 'text/plain',
  sh: 'text/x-shellscript',
  bash: 'text/x-shellscript',
  py: 'text/x-python',
  ts: 'text/plain',
  tsx: 'text/plain',
  jsx: 'text/javascript',
  sql: 'text/plain',
  go: 'text/plain',
  rs: 'text/plain',
  java: 'text/plain',
  c: 'text/plain',
  cpp: 'text/plain',
  h: 'text/plain',
  hpp: 'text/plain',
  rb: 'text/plain',
  php: 'text/plain',
  swift: 'text/plain',
  kt: 'text/plain',
  scala: 'text/plain',
  r: 'text/plain',
  m: 'text/plain',
  vue: 'text/plain',
  svelte: 'text/plain',
  dockerfile: 'text/plain',
  ipynb: 'application/json',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  bmp: 'image/bmp',
  ico: 'image/x-icon',
  avif: 'image/avif',
  tif: 'image/tiff',
  tiff: 'image/tiff',
  mp3: 'audio/mpeg',
  wav: 'audio/wav',
  ogg: 'audio/ogg',
  oga: 'audio/ogg',
  flac: 'audio/flac',
  m4a: 'audio/mp4',
  aac: 'audio/aac',
  wma: 'audio/x-ms-wma',
  opus: 'audio/ogg',
  mp4: 'video/mp4',
  webm: 'video/webm',
  mkv: 'video/x-matroska',
  mov: 'video/quicktime',
  avi: 'video/x-msvideo',
  ogv: 'video/ogg',
  pdf: 'application/pdf',
  zip: 'application/zip',
  gz: 'application/gzip',
  tgz: 'application/gzip',
  tar: 'application/x-tar',
  bz2: 'application/x-bzip2',
  xz: 'application/x-xz',
  '7z': 'application/x-7z-compressed',
  rar: 'application/vnd.rar',
  zst: 'application/zstd',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  pptx: 'application/vnd.openxmlformats-officedocument.presentationml.presentation',
  doc: 'application/msword',
  xls: 'application/vnd.ms-excel',
  ppt: 'application/vnd.ms-powerpoint',
  odt: 'application/vnd.oasis.opendocument.text',
  ods: 'application/vnd.oasis.opendocument.spreadsheet',
  drawio: 'application/xml',
  woff: 'font/woff',
  woff2: 'font/woff2',
  ttf: 'font/ttf',
  otf: 'font/otf',
  wasm: 'application/wasm',
  epub: 'application/epub+zip'
}

/** Served inline, these could run script; they get the sandbox CSP (§6.3 download details item 4). */
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

/** Lowercased extension without the dot; a bare `Dockerfile` counts as `dockerfile`. */
export function extensionOf (name: string): string {
  const lower = name.toLowerCase()
  if (lower === 'dockerfile') return 'dockerfile'
  const dot = lower.lastIndexOf('.')
  return dot <= 0 ? '' : lower.slice(dot + 1)
}

/** The bare MIME type (no parameters); unknown → application/octet-stream. */
export function mimeOf (name: string): string {
  return MIME[extensionOf(name)] ?? 'application/octet-stream'
}

/** The Content-Type header value: text types get `; charset=utf-8`. */
export function contentTypeOf (mime: string): string {
  return TEXTUAL.test(mime) ? `${mime}; charset=utf-8` : mime
}

export function isActive (mime: string): boolean { return ACTIVE.has(mime) }

export function isCompressed (name: string): boolean { return COMPRESSED.has(extensionOf(name)) }

/** The listing's `type` (§6.3 outputs listing item 5): extension first, then the MIME prefix, else `other`. */
export function typeClassOf (name: string, mime: string): string {
  const byExt = CLASS_BY_EXT.get(extensionOf(name))
  if (byExt !== undefined) return byExt
  const prefix = /^(image|audio|video|text)\//.exec(mime)
  return prefix !== null ? prefix[1] as string : 'other'
}
