import { extensionOf } from '../../core/mime.js'
import { compactSize } from '../../core/sizes.js'
import { shellQuote } from './text.js'

export const IMAGE_EXTENSIONS = new Set(['png', 'jpg', 'jpeg', 'gif', 'webp', 'bmp'])

const OFFICE_SKILL: Record<string, string> = { docx: 'docx', xlsx: 'xlsx', xls: 'xlsx', pptx: 'pptx', pdf: 'pdf' }

/** Extensions that are binary even when the first 8 KiB happen to hold no NUL byte. */
const BINARY_EXTENSIONS = new Set([
  '7z', 'a', 'avi', 'bin', 'bz2', 'class', 'dat', 'db', 'deb', 'dll', 'dmg', 'doc', 'dylib', 'eot',
  'epub', 'exe', 'flac', 'ico', 'iso', 'jar', 'lz', 'lzma', 'm4a', 'mkv', 'mov', 'mp3', 'mp4', 'mpeg',
  'npy', 'npz', 'o', 'obj', 'odp', 'ods', 'odt', 'ogg', 'otf', 'parquet', 'pickle', 'pkl', 'ppt', 'psd',
  'pyc', 'pyd', 'pyo', 'rar', 'rpm', 'so', 'sqlite', 'sqlite3', 'tif', 'tiff', 'ttf', 'wasm', 'wav',
  'webm', 'whl', 'woff', 'woff2', 'xz', 'zst'
])

export function isImagePath (path: string): boolean {
  return IMAGE_EXTENSIONS.has(extensionOf(path))
}

/** True when the first bytes are a PNG, JPEG, GIF, WebP or BMP signature. */
export function hasImageMagic (b: Buffer): boolean {
  if (b.length >= 8 && b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) return true
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return true
  if (b.length >= 6 && /^GIF8[79]a$/.test(b.subarray(0, 6).toString('latin1'))) return true
  if (b.length >= 12 && b.subarray(0, 4).toString('latin1') === 'RIFF' && b.subarray(8, 12).toString('latin1') === 'WEBP') return true
  // "BM" alone starts plenty of text files; a BMP header also has four reserved zero bytes at offset 6.
  return b.length >= 10 && b[0] === 0x42 && b[1] === 0x4d && b.readUInt32LE(6) === 0
}

/** NUL in the first 8 KiB (docs/contract.md#view). */
export function looksBinary (b: Buffer): boolean {
  return b.subarray(0, 8192).includes(0)
}

/**
 * The docs/contract.md#view hint for files view cannot show, chosen by extension (Office/PDF → the skill to read,
 * archives → the listing command). `undefined` when the extension is not one of them.
 */
export function knownBinaryHint (path: string): string | undefined {
  const ext = extensionOf(path)
  const q = shellQuote(path)
  const skill = OFFICE_SKILL[ext]
  if (skill !== undefined) {
    return `Error: Cannot view binary file ${path} (.${ext} document). Read /mnt/skills/public/${skill}/SKILL.md ` +
      'first and follow it to extract or edit the content.'
  }
  if (ext === 'zip') return `Error: Cannot view binary file ${path} (zip archive). List its contents with: unzip -l ${q}`
  if (ext === 'tar' || ext === 'tgz' || (ext === 'gz' && path.toLowerCase().endsWith('.tar.gz'))) {
    return `Error: Cannot view binary file ${path} (tar archive). List its contents with: tar -tvf ${q}`
  }
  if (ext === 'gz') return `Error: Cannot view binary file ${path} (gzip file). Read its start with: gunzip -c ${q} | head -n 100`
  return undefined
}

export function hasBinaryExtension (path: string): boolean {
  return BINARY_EXTENSIONS.has(extensionOf(path))
}

/** The generic binary-file error with size and a `file` hint. */
export function binaryFileError (path: string, size: number): string {
  return `Error: Cannot view binary file ${path} (${compactSize(size)}, ${size} bytes). ` +
    `Inspect it with: file ${shellQuote(path)} (then a suitable tool, e.g. xxd ${shellQuote(path)} | head)`
}
