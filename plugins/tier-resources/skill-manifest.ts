/*
 * The SEP-2640 entry of one skill (docs/contract.md#skills-extension): every regular file of its folder
 * with the SHA-256 and size of its bytes, the SKILL.md front matter as JSON (parsed and checked by the
 * SDK's `skillEntry`, the same reader SDK clients verify with), and the folder tree for
 * resources/directory/read. A skill beyond the extension's limits (512 files, 16 MiB), with a name the
 * Agent Skills rules refuse or a file name no URI can carry is not served through the extension (logged
 * once per build); its SKILL.md stays a resource. Builds run one at a time (at most 16 MiB held), are kept
 * for the TTL in a bounded LRU, and a file that no longer matches its entry drops the entry.
 */
import { createHash } from 'node:crypto'
import { join } from 'node:path'
import type { FastifyBaseLogger } from 'fastify'
import QuickLRU from 'quick-lru'
import { DIRECTORY_MIME_TYPE, SKILL_LIMITS, skillEntry, type DirectoryResource, type Skill } from '@modelcontextprotocol/server/ext/skills'
import { mimeOf } from '../../core/mime.js'
import { openVerified, walkTree, type WalkEntry } from '../../core/safe-path.js'

export interface SkillFile { relPath: string, uri: string, size: number, digest: string, mimeType: string }

export interface SkillManifest {
  /** `<category>/<name>`. */
  skillPath: string
  entry: Skill
  /** The skill's folder on the server. */
  folder: string
  /** Every file of the skill by its URI. */
  files: ReadonlyMap<string, SkillFile>
  /** Direct children of the skill's root and of each folder below it, by directory URI (sorted by URI). */
  dirs: ReadonlyMap<string, DirectoryResource[]>
}

export interface ManifestCache {
  /** The manifest of `skillPath` (`<category>/<name>`) whose files are in `folder`; undefined when not servable. */
  get (skillPath: string, folder: string): Promise<SkillManifest | undefined>
  /** Reads one file of a manifest, verified against its entry (size and digest); undefined when it changed (the manifest is dropped). */
  read (manifest: SkillManifest, file: SkillFile): Promise<Buffer | undefined>
}

const MAX_DEPTH = 16
// What the SDK percent-encodes in a path segment (WHATWG URL's path set plus `%`, `/`, `\`), so our URI
// for a file is the one skillEntry puts in the entry; anything that still does not round-trip is refused.
const ENCODED_IN_SEGMENT = /[^\w!$&'()*+,.:;=@[\]|~-]/gu
const encodeSegment = (segment: string): string => segment.replace(ENCODED_IN_SEGMENT, c => encodeURIComponent(c))

/** `skill://<category>/<name>` followed by the encoded relative path (empty: the skill's root). */
export function skillFileUri (skillPath: string, relPath: string): string {
  const root = `skill://${skillPath}`
  return relPath === '' ? root : `${root}/${relPath.split('/').map(encodeSegment).join('/')}`
}

const roundTrips = (uri: string): boolean => { try { return new URL(uri).href === uri } catch { return false } }
const compare = (a: string, b: string): number => a < b ? -1 : a > b ? 1 : 0

class NotServable extends Error {}

async function readExactly (folder: string, file: { relPath: string, size: number }): Promise<Buffer | undefined> {
  const handle = await openVerified(folder, join(folder, file.relPath)).catch(() => undefined)
  if (handle === undefined) return undefined
  try {
    // One byte more than expected tells a file that grew from one of the same size.
    const buffer = Buffer.alloc(file.size + 1)
    let filled = 0
    while (filled < buffer.length) {
      const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled, filled)
      if (bytesRead === 0) break
      filled += bytesRead
    }
    return filled === file.size ? buffer.subarray(0, filled) : undefined
  } finally {
    await handle.close().catch(() => {})
  }
}

/** The regular files of `folder`, refused beyond the limits (no file is read before the sizes are summed). */
async function listFiles (folder: string): Promise<WalkEntry[]> {
  const files: WalkEntry[] = []
  const walk = walkTree(folder, { limit: SKILL_LIMITS.files + 1, maxEntries: 4 * SKILL_LIMITS.files, maxDepth: MAX_DEPTH })
  let bytes = 0
  for (let next = await walk.next(); ; next = await walk.next()) {
    if (next.done === true) {
      if (next.value.exceeded || next.value.limited) throw new NotServable(`more than ${SKILL_LIMITS.files} files`)
      return files
    }
    files.push(next.value)
    bytes += next.value.size
    if (bytes > SKILL_LIMITS.bytes) throw new NotServable(`more than ${SKILL_LIMITS.bytes} bytes`)
  }
}

function directories (skillPath: string, files: SkillFile[]): Map<string, DirectoryResource[]> {
  const dirs = new Map<string, DirectoryResource[]>([[skillFileUri(skillPath, ''), []]])
  const seen = new Set<string>()
  for (const file of files) {
    const segments = file.relPath.split('/')
    for (let depth = 0; depth < segments.length; depth++) {
      const parent = skillFileUri(skillPath, segments.slice(0, depth).join('/'))
      const name = segments[depth] as string
      const isFile = depth === segments.length - 1
      const uri = isFile ? file.uri : skillFileUri(skillPath, segments.slice(0, depth + 1).join('/'))
      if (seen.has(uri)) continue
      seen.add(uri)
      let children = dirs.get(parent)
      if (children === undefined) dirs.set(parent, children = [])
      children.push(isFile ? { uri, name, mimeType: file.mimeType, size: file.size } : { uri, name, mimeType: DIRECTORY_MIME_TYPE })
      if (!isFile && !dirs.has(uri)) dirs.set(uri, [])
    }
  }
  for (const children of dirs.values()) children.sort((a, b) => compare(a.uri, b.uri))
  return dirs
}

async function build (skillPath: string, folder: string): Promise<SkillManifest> {
  const listed = await listFiles(folder)
  const contents: Record<string, Buffer> = {}
  const files: SkillFile[] = []
  for (const entry of listed) {
    const bytes = await readExactly(folder, entry)
    if (bytes === undefined) throw new NotServable(`${entry.relPath} changed while it was read`)
    const uri = skillFileUri(skillPath, entry.relPath)
    if (!roundTrips(uri)) throw new NotServable(`the file name ${JSON.stringify(entry.relPath)} cannot be carried by a URI`)
    contents[entry.relPath] = bytes
    const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`
    files.push({ relPath: entry.relPath, uri, size: bytes.length, digest, mimeType: entry.relPath === 'SKILL.md' ? 'text/markdown' : mimeOf(entry.relPath) })
  }
  let entry: Skill
  try {
    entry = await skillEntry(skillPath, contents)
  } catch (err) {
    throw new NotServable(err instanceof Error ? err.message.replace(/\s+/g, ' ').slice(0, 500) : 'invalid skill')
  }
  const ours = new Map(files.map(f => [f.uri, f]))
  if (entry.resources === 'dynamic' || entry.resources.length !== files.length || entry.resources.some(r => ours.get(r.uri)?.digest !== r.digest)) {
    throw new NotServable('the file URIs differ from the entry\'s')
  }
  return { skillPath, entry, folder, files: ours, dirs: directories(skillPath, files) }
}

export function createManifestCache (log: FastifyBaseLogger, opts: { ttlMs: number, maxEntries: number }): ManifestCache {
  const cache = new QuickLRU<string, SkillManifest | null>({ maxSize: opts.maxEntries, maxAge: opts.ttlMs })
  const inflight = new Map<string, Promise<SkillManifest | null>>()
  // One build at a time: each may hold up to 16 MiB of file contents while it hashes them.
  let queue: Promise<unknown> = Promise.resolve()
  const keyOf = (skillPath: string, folder: string): string => `${skillPath}\u0000${folder}`

  const buildOnce = async (skillPath: string, folder: string): Promise<SkillManifest | null> => {
    try {
      return await build(skillPath, folder)
    } catch (err) {
      if (!(err instanceof NotServable)) throw err
      log.warn({ skill: skillPath, reason: err.message }, 'skill not served through the skills extension')
      return null
    }
  }

  return {
    async get (skillPath, folder) {
      const key = keyOf(skillPath, folder)
      const cached = cache.get(key)
      if (cached !== undefined) return cached ?? undefined
      let pending = inflight.get(key)
      if (pending === undefined) {
        pending = queue.then(async () => await buildOnce(skillPath, folder))
        queue = pending.catch(() => undefined)
        inflight.set(key, pending)
        void pending.then(manifest => { cache.set(key, manifest) }, () => {}).finally(() => { inflight.delete(key) })
      }
      return (await pending) ?? undefined
    },

    async read (manifest, file) {
      const bytes = await readExactly(manifest.folder, file)
      if (bytes !== undefined && `sha256:${createHash('sha256').update(bytes).digest('hex')}` === file.digest) return bytes
      cache.delete(keyOf(manifest.skillPath, manifest.folder))
      return undefined
    }
  }
}
