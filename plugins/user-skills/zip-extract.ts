/*
 * Safe extraction of a user skill ZIP (docs/contract.md#skills; zip-slip, docs/contract.md#reference-weaknesses-we-do-not-repeat). yauzl reads the central
 * directory lazily and streams each entry with size and CRC checks, without loading the archive. The
 * whole directory is checked before the first byte is written: an absolute path, a `..` or empty
 * segment, a backslash, a control character, a symlink, a device/FIFO/socket, an encrypted or unknown
 * compression entry, a duplicate path, too many entries or too many bytes refuses the ZIP, and nothing
 * is extracted. Files are then created exclusively (O_EXCL | O_NOFOLLOW) below a fresh directory.
 */
import { constants } from 'node:fs'
import { chmod, mkdir, open } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { pipeline } from 'node:stream/promises'
import { Writable } from 'node:stream'
import yauzl from 'yauzl'
import { USER_SKILLS_ZIP_REFUSED } from './errors.js'

export interface ExtractLimits { maxEntries: number, maxBytes: number }

interface Planned { entry: yauzl.Entry, path: string, dir: boolean, executable: boolean }

const S_IFMT = 0o170000
const S_IFREG = 0o100000
const S_IFDIR = 0o040000
const S_IFLNK = 0o120000
const MAX_PATH_BYTES = 1024
const MAX_DEPTH = 32
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/

const refuse = (why: string): Error => new USER_SKILLS_ZIP_REFUSED(why)

function openZip (file: string): Promise<yauzl.ZipFile> {
  return new Promise((resolve, reject) => {
    yauzl.open(file, { lazyEntries: true, autoClose: false, decodeStrings: true, validateEntrySizes: true, strictFileNames: true }, (err, zip) => {
      if (err !== null || zip === undefined) reject(refuse(`not a readable ZIP (${err?.message ?? 'unknown error'})`))
      else resolve(zip)
    })
  })
}

/** Every entry of the central directory; yauzl's own name checks (absolute, `..`, backslash) surface as refusals. */
function readDirectory (zip: yauzl.ZipFile, maxEntries: number): Promise<yauzl.Entry[]> {
  return new Promise((resolve, reject) => {
    const entries: yauzl.Entry[] = []
    zip.on('entry', (entry: yauzl.Entry) => {
      entries.push(entry)
      if (entries.length > maxEntries) { reject(refuse(`more than ${maxEntries} entries`)); return }
      zip.readEntry()
    })
    zip.on('end', () => { resolve(entries) })
    zip.on('error', (err: Error) => { reject(refuse(`unsafe or corrupt entry (${err.message})`)) })
    zip.readEntry()
  })
}

/** Checks one entry; returns its relative path segments and kind. */
function check (entry: yauzl.Entry): { segments: string[], dir: boolean, executable: boolean } {
  const name = entry.fileName
  if (Buffer.byteLength(name) > MAX_PATH_BYTES) throw refuse('an entry name is too long')
  if (CONTROL.test(name) || name.includes('\\')) throw refuse(`entry ${JSON.stringify(name)} has a control character or backslash`)
  if (name.startsWith('/') || /^[A-Za-z]:/.test(name)) throw refuse(`entry ${JSON.stringify(name)} is an absolute path`)
  const dir = name.endsWith('/')
  const segments = (dir ? name.slice(0, -1) : name).split('/')
  if (segments.some(s => s === '..')) throw refuse(`entry ${JSON.stringify(name)} climbs out with ..`)
  if (segments.some(s => s === '' || s === '.')) throw refuse(`entry ${JSON.stringify(name)} has an empty or . segment`)
  if (segments.length > MAX_DEPTH) throw refuse(`entry ${JSON.stringify(name)} is nested too deep`)
  const madeBy = entry.versionMadeBy >>> 8
  const mode = (entry.externalFileAttributes >>> 16) & 0xffff
  const type = mode & S_IFMT
  // Unix (3) and macOS (19) archivers store the file type; others only the trailing slash.
  if ((madeBy === 3 || madeBy === 19) && type !== 0) {
    if (type === S_IFLNK) throw refuse(`entry ${JSON.stringify(name)} is a symbolic link`)
    if (type !== S_IFREG && type !== S_IFDIR) throw refuse(`entry ${JSON.stringify(name)} is a device, FIFO or socket`)
    if ((type === S_IFDIR) !== dir) throw refuse(`entry ${JSON.stringify(name)} claims the wrong type`)
  }
  if (entry.isEncrypted()) throw refuse(`entry ${JSON.stringify(name)} is encrypted`)
  if (!dir && !entry.canDecodeFileData()) throw refuse(`entry ${JSON.stringify(name)} uses an unsupported compression method`)
  return { segments, dir, executable: (mode & 0o111) !== 0 }
}

/**
 * The extraction plan: checked entries with one common top-level folder stripped (when every entry
 * lies below the same first segment), SKILL.md required at the top.
 */
export function plan (entries: yauzl.Entry[], limits: ExtractLimits): Planned[] {
  const checked = entries.map(entry => ({ entry, ...check(entry) }))
  let total = 0
  for (const c of checked) {
    total += c.dir ? 0 : c.entry.uncompressedSize
    if (total > limits.maxBytes) throw refuse(`more than ${limits.maxBytes} bytes uncompressed`)
  }
  const first = checked[0]?.segments[0]
  const strip = first !== undefined && checked.every(c => c.segments[0] === first && (c.segments.length > 1 || c.dir))
  const out: Planned[] = []
  const seen = new Set<string>()
  for (const c of checked) {
    const segments = strip ? c.segments.slice(1) : c.segments
    if (segments.length === 0) continue // the stripped folder itself
    const path = segments.join('/')
    if (seen.has(path)) throw refuse(`entry ${JSON.stringify(path)} appears twice`)
    seen.add(path)
    out.push({ entry: c.entry, path, dir: c.dir, executable: c.executable })
  }
  if (!out.some(p => p.path === 'SKILL.md' && !p.dir)) throw refuse('no SKILL.md at the top of the ZIP (or below one common folder)')
  // A file whose path is also a folder of another entry cannot be extracted.
  for (const p of out) {
    const parts = p.path.split('/')
    for (let i = 1; i < parts.length; i++) {
      const parent = parts.slice(0, i).join('/')
      if (out.some(q => q.path === parent && !q.dir)) throw refuse(`entry ${JSON.stringify(p.path)} lies below a file`)
    }
  }
  return out
}

function openEntry (zip: yauzl.ZipFile, entry: yauzl.Entry): Promise<NodeJS.ReadableStream> {
  return new Promise((resolve, reject) => {
    zip.openReadStream(entry, (err, stream) => {
      if (err !== null || stream === undefined) reject(refuse(`entry ${JSON.stringify(entry.fileName)} cannot be read (${err?.message ?? 'unknown'})`))
      else resolve(stream)
    })
  })
}

async function writeEntry (zip: yauzl.ZipFile, item: Planned, target: string, budget: { left: number }): Promise<void> {
  await mkdir(dirname(target), { recursive: true, mode: 0o755 })
  const handle = await open(target, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, item.executable ? 0o755 : 0o644)
  try {
    const source = await openEntry(zip, item.entry)
    await pipeline(source, new Writable({
      write (chunk: Buffer, _enc, done) {
        budget.left -= chunk.length
        if (budget.left < 0) { done(refuse('more bytes than declared')); return }
        handle.write(chunk).then(() => { done() }, done)
      }
    }))
    await handle.chmod(item.executable ? 0o755 : 0o644)
  } finally { await handle.close() }
}

/**
 * Extracts `zipFile` into `destDir`, which must not exist yet (it is created with mode 0755). On a
 * refusal before writing, `destDir` is never created; on a failure while writing the caller removes
 * it (it is a temporary directory).
 */
export async function extractSkillZip (zipFile: string, destDir: string, limits: ExtractLimits): Promise<void> {
  const zip = await openZip(zipFile)
  try {
    const items = plan(await readDirectory(zip, limits.maxEntries), limits)
    await mkdir(destDir, { mode: 0o755 })
    const budget = { left: limits.maxBytes }
    const dirs = new Set<string>([destDir])
    for (const item of items) {
      const target = join(destDir, ...item.path.split('/'))
      const parts = item.path.split('/')
      for (let i = 1; i < parts.length + (item.dir ? 1 : 0); i++) dirs.add(join(destDir, ...parts.slice(0, i)))
      if (item.dir) await mkdir(target, { recursive: true, mode: 0o755 })
      else await writeEntry(zip, item, target, budget)
    }
    // mkdir's mode passes through the umask; the sandbox user must be able to read every folder.
    for (const dir of dirs) await chmod(dir, 0o755)
  } finally { zip.close() }
}
