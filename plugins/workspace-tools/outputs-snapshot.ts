import type { WalkEntry, WalkOptions, WalkSummary } from '../chat-storage/types.js'

/*
 * Before/after snapshots of a chat's outputs directory, read on the host (the server's view of the
 * bind mount) instead of with extra execs. The walk is chat storage's descriptor-based walk: the
 * sandbox can plant symlinks or swap directories for them while we look, and neither is ever followed,
 * so no name, size or mtime from outside this chat's outputs can reach the links of a result.
 */

/** relative path → "size:mtime" of every regular file. */
export type OutputsSnapshot = Map<string, string>

export const SNAPSHOT_MAX_ENTRIES = 2000

/** Walks one chat's outputs (chatStorage.walk bound to the chat). */
export type OutputsWalker = (opts: WalkOptions) => AsyncGenerator<WalkEntry, WalkSummary, undefined>

/** undefined when the directory is missing or holds more than `maxEntries` entries (docs/contract.md#bash_tool: skipped). */
export async function snapshotOutputs (walker: OutputsWalker, maxEntries = SNAPSHOT_MAX_ENTRIES): Promise<OutputsSnapshot | undefined> {
  const files: OutputsSnapshot = new Map()
  const walk = walker({ maxEntries })
  for (let step = await walk.next(); ; step = await walk.next()) {
    if (step.done === true) return step.value.found && !step.value.exceeded ? files : undefined
    files.set(step.value.relPath, `${step.value.size}:${step.value.mtimeMs}`)
  }
}

/** Files that are new or changed in `after`, sorted by path. */
export function changedOutputs (before: OutputsSnapshot, after: OutputsSnapshot): string[] {
  const changed: string[] = []
  for (const [rel, sig] of after) if (before.get(rel) !== sig) changed.push(rel)
  return changed.sort()
}
