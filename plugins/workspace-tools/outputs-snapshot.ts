import type { WalkEntry, WalkOptions, WalkSummary } from '../chat-storage/types.js'

/*
 * Which files of a chat's outputs a bash_tool command created or changed (docs/contract.md#bash_tool),
 * read on the host (the server's view of the bind mount) instead of with extra execs. The walk is chat
 * storage's descriptor-based walk: the sandbox can plant symlinks or swap directories for them while we
 * look, and neither is ever followed, so no name, size or mtime from outside this chat's outputs can
 * reach the links of a result.
 *
 * A file is listed when its size or mtime differs from what it was when the command started (or it is
 * new). Knowing that used to take a walk before every command; now it takes one when the chat has no
 * recent walk, and otherwise the file system's change clock (chatStorage.changeClock): a file whose
 * `changedMs` (its ctime, or a later one of a directory above it) is older than the clock's reading was
 * not touched since, so it is what it was at the start; one at least as late is compared with the chat's
 * last walk (the previous call's walk after its command), which is what it was at the start unless
 * something else changed it in the meantime. Nothing in the sandbox can make a change look older: nobody
 * sets a ctime (touch sets mtime and atime), and renaming a directory stamps the directory.
 */

/** relative path → "size:mtime" of every regular file. */
export type OutputsSnapshot = Map<string, string>

export const SNAPSHOT_MAX_ENTRIES = 2000

/** Walks one chat's outputs (chatStorage.walk bound to the chat). */
export type OutputsWalker = (opts: WalkOptions) => AsyncGenerator<WalkEntry, WalkSummary, undefined>

/** One chat's outputs as a bash_tool call reaches them: walked, and the change clock (chatStorage.changeClock bound to the chat). */
export interface OutputsAccess {
  walk: OutputsWalker
  clock: () => Promise<number | undefined>
}

/** A walk: each file's signature and, with `changeTimes`, its `changedMs`. */
interface Scan { files: OutputsSnapshot, changed: Map<string, number> }

async function scan (walker: OutputsWalker, maxEntries: number, changeTimes: boolean): Promise<Scan | undefined> {
  const files: OutputsSnapshot = new Map()
  const changed = new Map<string, number>()
  const walk = walker({ maxEntries, ...(changeTimes && { changeTimes }) })
  for (let step = await walk.next(); ; step = await walk.next()) {
    if (step.done === true) return step.value.found && !step.value.exceeded ? { files, changed } : undefined
    const e = step.value
    files.set(e.relPath, `${e.size}:${e.mtimeMs}`)
    if (e.changedMs !== undefined) changed.set(e.relPath, e.changedMs)
  }
}

/** undefined when the directory is missing or holds more than `maxEntries` entries (docs/contract.md#bash_tool: skipped). */
export async function snapshotOutputs (walker: OutputsWalker, maxEntries = SNAPSHOT_MAX_ENTRIES): Promise<OutputsSnapshot | undefined> {
  return (await scan(walker, maxEntries, false))?.files
}

/** Files that are new or changed in `after`, sorted by path. */
export function changedOutputs (before: OutputsSnapshot, after: OutputsSnapshot): string[] {
  const changed: string[] = []
  for (const [rel, sig] of after) if (before.get(rel) !== sig) changed.push(rel)
  return changed.sort()
}

/**
 * What a call knows before its command: the outputs walked, or the change clock's reading with the chat's
 * last walk. undefined: the directory is missing or too large (no links, as for a walk that found so).
 */
export type OutputsBaseline = { walked: OutputsSnapshot } | { since: number, known: OutputsSnapshot, wall: number, mono: number } | undefined

/** How much of the chats' last walks is kept (the rest walk before their command, as without a clock). */
export interface TrackerLimits {
  /** chats (least recently used dropped first) */
  chats: number
  /** files of one chat's walk, and the characters of their paths */
  files: number
  chars: number
}

export const TRACKER_LIMITS: TrackerLimits = { chats: 256, files: 128, chars: 16_384 }

export interface OutputsTracker {
  /** Before the command. */
  before (chatId: string, outputs: OutputsAccess): Promise<OutputsBaseline>
  /** After it: the files it created or changed, sorted by path (none for an undefined baseline). */
  after (chatId: string, baseline: OutputsBaseline, outputs: OutputsAccess): Promise<string[]>
}

interface Known { files: OutputsSnapshot, seq: number }

/** The clocks the tracker compares (tests step them). */
export interface TrackerClocks { wall: () => number, mono: () => number }

const SYSTEM_CLOCKS: TrackerClocks = { wall: Date.now, mono: () => performance.now() }

/**
 * Whether the host's clock was stepped back since `b` was read: the wall clock advanced less than the monotonic
 * one, beyond what slewing does (1 ms + 1,000 ppm). A change stamped after such a step may look older than the
 * change clock's reading.
 */
function steppedBack (b: { wall: number, mono: number }, clocks: TrackerClocks): boolean {
  const mono = clocks.mono() - b.mono
  return clocks.wall() - b.wall < mono - 1 - mono / 1000
}

/** One per bash_tool: each chat's last complete walk, bounded by `limits`. */
export function createOutputsTracker (limits: TrackerLimits = TRACKER_LIMITS, maxEntries = SNAPSHOT_MAX_ENTRIES, clocks: TrackerClocks = SYSTEM_CLOCKS): OutputsTracker {
  const known = new Map<string, Known>()
  // Walks are numbered as they start: a walk that started later saw a later state, whichever ends first.
  let seq = 0

  function remember (chatId: string, at: number, files: OutputsSnapshot | undefined): void {
    const had = known.get(chatId)
    if (had !== undefined && had.seq > at) return
    known.delete(chatId)
    let chars = 0
    for (const rel of files?.keys() ?? []) chars += rel.length
    if (files === undefined || files.size > limits.files || chars > limits.chars) return
    known.set(chatId, { files, seq: at })
    for (const oldest of known.keys()) {
      if (known.size <= limits.chats) break
      known.delete(oldest)
    }
  }

  return {
    async before (chatId, outputs) {
      const last = known.get(chatId)
      if (last !== undefined) {
        // Read before the command starts: whatever it changes is stamped at least this late.
        const since = await outputs.clock()
        if (since !== undefined) {
          // Used last: dropped last (unless a walk that ended meanwhile replaced it).
          if (known.get(chatId) === last) { known.delete(chatId); known.set(chatId, last) }
          return { since, known: last.files, wall: clocks.wall(), mono: clocks.mono() }
        }
      }
      const at = ++seq
      const walked = await snapshotOutputs(outputs.walk, maxEntries)
      remember(chatId, at, walked)
      return walked === undefined ? undefined : { walked }
    },
    async after (chatId, baseline, outputs) {
      if (baseline === undefined) return []
      const at = ++seq
      const now = await scan(outputs.walk, maxEntries, 'since' in baseline)
      remember(chatId, at, now?.files)
      if (now === undefined) return []
      if ('walked' in baseline) return changedOutputs(baseline.walked, now.files)
      // The clock went back during the command: its changes may look older than the reading, so every file that
      // differs from the last walk is listed (more than the command's, never fewer).
      if (steppedBack(baseline, clocks)) return changedOutputs(baseline.known, now.files)
      const changed: string[] = []
      for (const [rel, sig] of now.files) {
        if ((now.changed.get(rel) ?? Number.POSITIVE_INFINITY) >= baseline.since && baseline.known.get(rel) !== sig) changed.push(rel)
      }
      return changed.sort()
    }
  }
}
