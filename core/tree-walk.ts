/*
 * Walks a directory tree that a sandbox may change while we look (docs/contract.md#archive, docs/contract.md#path-rules):
 * the sandbox can swap any directory for a symlink (to another chat's outputs, to a host
 * directory) between the moment we list its parent and the moment we descend. A walk by path would
 * follow that symlink in the server's namespace and report foreign names, sizes and mtimes.
 *
 * So the walk goes by descriptor, like openat(2):
 *   - every directory is opened O_DIRECTORY|O_NOFOLLOW *through its parent's descriptor*
 *     (`/proc/self/fd/<parent>/<name>`): a symlink in its place fails to open (ELOOP/ENOTDIR), and a
 *     swap of any ancestor cannot redirect it;
 *   - the descriptor is then verified: `readlink /proc/self/fd/<n>` must be exactly the expected path
 *     below realpath(base), otherwise the directory moved under us and is skipped;
 *   - it is listed and its entries are lstat'ed relative to the descriptor (`/proc/self/fd/<n>/<name>`),
 *     so names and metadata always come from the directory that was verified.
 * A descriptor stays open only while its subtree is walked: at most maxDepth + 1 directories (plus one
 * listing handle) are open at once. Without /proc (not Linux; development only, the server runs in
 * Linux containers) Node has no openat/fdopendir: the verified path is used instead, each directory
 * checked by realpath plus a (dev, inode) match with its open descriptor. That still refuses planted
 * and swapped symlinks but cannot close the window between the check and the listing.
 */
import { constants, type Dirent } from 'node:fs'
import { lstat, open, opendir, readlink, realpath, type FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import { errnoCode } from './errno.js'

/** One regular file found by walkRegularFiles. */
export interface WalkEntry {
  /** Path relative to the base, `/`-separated. */
  relPath: string
  /** Absolute host path (below realpath(base)). */
  absPath: string
  size: number
  mtimeMs: number
  /** Inode number: with size and mtime it identifies one version of a file (upload md5 cache). */
  ino: number
  /**
   * With `changeTimes`: the latest inode change time (ctime, as fs.Stats.ctimeMs) of the file and of the
   * directories between the base and it. A rename of one of those directories moves the file without
   * changing its own ctime, and nobody can set a ctime: it is the kernel's clock at the last change.
   */
  changedMs?: number
}

export interface WalkOptions {
  /** Skip every entry (file or directory, at any depth) whose name starts with `.`. */
  skipDot?: boolean
  /** Stop after yielding this many files (callers detecting "too many" pass their cap + 1). */
  limit?: number
  /** Do not descend deeper than this many directory levels (default 64). */
  maxDepth?: number
  /**
   * Stop as soon as more than this many directory entries (of any type, at any depth) exist in the
   * directories read; the summary then has `exceeded: true`. Reading stops there too, so a directory of
   * a million entries costs no more than the budget.
   */
  maxEntries?: number
  /** Entries carry `changedMs` (each directory below the base is stat'ed beside its descriptor check). */
  changeTimes?: boolean
  /** Test hook: runs after a directory was listed and before its entries are examined. */
  afterList?: (relDir: string) => Promise<void> | void
  /**
   * The caller just resolved `baseDir` with realpath: it is not resolved again (one file system call less
   * per walk). The base is still opened O_NOFOLLOW and verified to be exactly that path.
   */
  resolvedBase?: boolean
}

/** What the generator returns when it is done (`for await` ignores it; iterate with next() to read it). */
export interface WalkSummary {
  /** The base directory exists and was opened. */
  found: boolean
  /** Directory entries read. */
  entries: number
  /** maxEntries was exceeded: the walk is incomplete. */
  exceeded: boolean
  /** limit files were yielded: the walk may be incomplete. */
  limited: boolean
}

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW
/** Open errors that mean "not (or no longer) a directory we may enter": skip it. */
const SKIP = new Set(['ENOENT', 'ENOTDIR', 'ELOOP', 'EACCES', 'EPERM'])

/** A directory's entries as listEntries read them. */
interface Listing { entries: Dirent[], exceeded: boolean }

/**
 * An open, verified directory: `ref` reaches it (its /proc/self/fd link, or its checked path); its ctime
 * when asked, its listing when it was read while the descriptor was checked.
 */
interface Opened { handle: FileHandle, ref: string, ctimeMs?: number, listed?: Listing }

/** `ref` for an open directory that must be `expected`, or undefined when it is somewhere else. */
async function verifiedRef (handle: FileHandle, expected: string): Promise<string | undefined> {
  const magic = `/proc/self/fd/${handle.fd}`
  try {
    return await readlink(magic) === expected ? magic : undefined
  } catch (err) {
    if (errnoCode(err) !== 'ENOENT') throw err
  }
  const [info, real] = await Promise.all([handle.stat(), realpath(expected).catch(() => undefined)])
  if (real !== expected) return undefined
  const again = await lstat(expected).catch(() => undefined)
  return again !== undefined && again.dev === info.dev && again.ino === info.ino ? expected : undefined
}

/**
 * Opens `path` as a directory without following a final symlink and verifies it is `expected`. While the
 * descriptor is checked, its directory is already listed through it (up to `budget` entries) and, with
 * `ctime`, stat'ed: the thread-pool round trips overlap (docs/performance.md). Nothing of the listing is
 * used unless the check passes; without /proc the verified path is listed afterwards instead.
 */
async function openDirectory (path: string, expected: string, budget: number, ctime = false): Promise<Opened | undefined> {
  let handle: FileHandle
  try {
    handle = await open(path, DIR_FLAGS)
  } catch (err) {
    if (SKIP.has(errnoCode(err) ?? '')) return undefined
    throw err
  }
  const magic = `/proc/self/fd/${handle.fd}`
  const [ref, listed, ctimeMs] = await Promise.allSettled([
    verifiedRef(handle, expected),
    listEntries(magic, budget),
    ctime ? handle.stat().then(s => s.ctimeMs) : undefined
  ])
  // A directory that is not where it should be is skipped, whatever its listing did.
  const failed = ref.status === 'fulfilled' && ref.value === undefined ? undefined : [ref, listed, ctimeMs].find(r => r.status === 'rejected')
  if (ref.status !== 'fulfilled' || ref.value === undefined || failed !== undefined) {
    await handle.close().catch(() => {})
    if (failed !== undefined) throw failed.reason
    return undefined
  }
  return {
    handle,
    ref: ref.value,
    ...(ctimeMs.status === 'fulfilled' && ctimeMs.value !== undefined && { ctimeMs: ctimeMs.value }),
    ...(ref.value === magic && listed.status === 'fulfilled' && { listed: listed.value })
  }
}

/**
 * Closes a descriptor without waiting for it: the walk goes on at once (each close is a round trip through
 * the thread pool; a bash_tool call walks outputs twice, docs/performance.md). Nothing after depends on it.
 */
function closeLater (handle: { close: () => Promise<void> }): void {
  handle.close().catch(() => {})
}

/** Up to `budget` entries of the directory `ref` reaches, sorted by name; more than budget → `exceeded`. */
async function listEntries (ref: string, budget: number): Promise<Listing> {
  const entries: Dirent[] = []
  let handle
  try {
    handle = await opendir(ref, { bufferSize: 256 })
  } catch (err) {
    if (SKIP.has(errnoCode(err) ?? '')) return { entries, exceeded: false }
    throw err
  }
  try {
    for (let entry = await handle.read(); entry !== null; entry = await handle.read()) {
      if (entries.length >= budget) return { entries, exceeded: true }
      entries.push(entry)
    }
  } finally { closeLater(handle) }
  entries.sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
  return { entries, exceeded: false }
}

interface Frame extends Opened {
  rel: string
  depth: number
  /** The latest ctime of the directories between the base and this one (the base's own not counted). */
  changedMs: number
  /** Names of the regular files found by the listing (lstat'ed when yielded); undefined until listed. */
  files?: string[]
  subdirs: string[]
  next: number
}

const childRel = (rel: string, name: string): string => rel === '' ? name : `${rel}/${name}`

/** Directory entries the walk may still read (maxEntries). */
const budgetLeft = (summary: WalkSummary, opts: WalkOptions): number => (opts.maxEntries ?? Number.POSITIVE_INFINITY) - summary.entries

/** Lists a frame's directory into its file and subdirectory names. false: the entry budget ran out. */
async function listFrame (top: Frame, summary: WalkSummary, opts: WalkOptions, maxDepth: number): Promise<boolean> {
  const { entries, exceeded } = top.listed ?? await listEntries(top.ref, budgetLeft(summary, opts))
  top.listed = undefined
  summary.entries += entries.length
  if (exceeded) return false
  await opts.afterList?.(top.rel)
  top.files = []
  for (const entry of entries) {
    if (opts.skipDot === true && entry.name.startsWith('.')) continue
    if (entry.isDirectory() && top.depth + 1 < maxDepth) top.subdirs.push(entry.name)
    else if (entry.isFile()) top.files.push(entry.name)
  }
  return true
}

/** The frame's files that are still regular files, stat'ed relative to its descriptor. */
async function * filesOf (top: Frame, realBase: string, changeTimes: boolean): AsyncGenerator<WalkEntry> {
  for (const name of top.files ?? []) {
    const info = await lstat(`${top.ref}/${name}`).catch(() => undefined)
    if (info === undefined || !info.isFile()) continue
    const relPath = childRel(top.rel, name)
    yield {
      relPath,
      absPath: join(realBase, relPath),
      size: info.size,
      mtimeMs: info.mtimeMs,
      ino: info.ino,
      ...(changeTimes && { changedMs: Math.max(info.ctimeMs, top.changedMs) })
    }
  }
}

/** realpath(base) and its directory, opened and verified; undefined when there is none. */
async function openBase (baseDir: string, resolved: boolean, budget: number): Promise<{ realBase: string, root: Opened } | undefined> {
  const realBase = resolved
    ? baseDir
    : await realpath(baseDir).catch((err: unknown) => {
      if (SKIP.has(errnoCode(err) ?? '')) return undefined
      throw err
    })
  const root = realBase === undefined ? undefined : await openDirectory(realBase, realBase, budget)
  return realBase === undefined || root === undefined ? undefined : { realBase, root }
}

/**
 * Yields the regular files below `baseDir` (depth first, names sorted; a directory's files before its
 * subdirectories), never following a symlink and never leaving realpath(baseDir), even while the tree
 * changes (see the header). Symlinks, sockets, fifos and devices are skipped. A missing base yields
 * nothing; a directory that vanishes or moves during the walk is skipped. Returns a WalkSummary.
 */
export function walkRegularFiles (baseDir: string, opts: WalkOptions = {}): AsyncGenerator<WalkEntry> {
  return walkTree(baseDir, opts)
}

/** walkRegularFiles typed with its return value, for callers that need the summary (iterate with next()). */
export async function * walkTree (baseDir: string, opts: WalkOptions = {}): AsyncGenerator<WalkEntry, WalkSummary, undefined> {
  const summary: WalkSummary = { found: false, entries: 0, exceeded: false, limited: false }
  const limit = opts.limit ?? Number.POSITIVE_INFINITY
  const maxDepth = opts.maxDepth ?? 64
  const base = limit > 0 ? await openBase(baseDir, opts.resolvedBase === true, budgetLeft(summary, opts)) : undefined
  if (base === undefined) return summary
  summary.found = true
  const changeTimes = opts.changeTimes === true
  const stack: Frame[] = [{ ...base.root, rel: '', depth: 0, changedMs: Number.NEGATIVE_INFINITY, subdirs: [], next: 0 }]
  let count = 0
  try {
    while (stack.length > 0) {
      const top = stack[stack.length - 1] as Frame
      if (top.files === undefined) {
        if (!await listFrame(top, summary, opts, maxDepth)) { summary.exceeded = true; return summary }
        for await (const file of filesOf(top, base.realBase, changeTimes)) {
          yield file
          if (++count >= limit) { summary.limited = true; return summary }
        }
        continue
      }
      const name = top.subdirs[top.next++]
      if (name === undefined) {
        stack.pop()
        closeLater(top.handle)
        continue
      }
      const rel = childRel(top.rel, name)
      const child = await openDirectory(`${top.ref}/${name}`, join(base.realBase, rel), budgetLeft(summary, opts), changeTimes)
      if (child !== undefined) stack.push({ ...child, rel, depth: top.depth + 1, changedMs: Math.max(top.changedMs, child.ctimeMs ?? Number.NEGATIVE_INFINITY), subdirs: [], next: 0 })
    }
    return summary
  } finally {
    for (const frame of stack) closeLater(frame.handle)
  }
}
