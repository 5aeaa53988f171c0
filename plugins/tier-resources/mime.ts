import { lookup } from 'mime-types'

// Extensions mime-types misses or maps to something unhelpful for a model (.ts is not a video here).
const OVERRIDES: Record<string, string> = {
  ts: 'text/x-typescript',
  tsx: 'text/x-typescript',
  mts: 'text/x-typescript',
  cts: 'text/x-typescript',
  py: 'text/x-python',
  go: 'text/x-go',
  rs: 'text/x-rust',
  rb: 'text/x-ruby',
  toml: 'text/x-toml',
  sql: 'text/x-sql',
  env: 'text/plain',
  ipynb: 'application/json',
  log: 'text/plain'
}

const TEXT_TYPES = new Set(['application/json', 'application/xml', 'application/yaml', 'application/x-yaml', 'application/javascript', 'application/x-sh'])

/** MIME guessed from the extension (surface.md §4.3 item 4); unknown → application/octet-stream. */
export function guessMime (relPath: string): string {
  const name = relPath.slice(relPath.lastIndexOf('/') + 1)
  const dot = name.lastIndexOf('.')
  const ext = dot > 0 ? name.slice(dot + 1).toLowerCase() : ''
  return OVERRIDES[ext] ?? (ext === '' ? undefined : lookup(ext) || undefined) ?? 'application/octet-stream'
}

/** Whether resources/read returns `text` (else a base64 `blob`). */
export function isTextMime (mime: string): boolean {
  return mime.startsWith('text/') || TEXT_TYPES.has(mime)
}

/** Size in words for descriptions: 512 bytes, 12.3 KiB, 4.0 MiB. */
export function humanSize (bytes: number): string {
  if (bytes < 1024) return `${bytes} byte${bytes === 1 ? '' : 's'}`
  const units = ['KiB', 'MiB', 'GiB', 'TiB']
  let value = bytes / 1024
  let unit = 0
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit++ }
  return `${value.toFixed(1)} ${units[unit] as string}`
}
