import { lstat, readdir } from 'node:fs/promises'
import { join } from 'node:path'

/*
 * Before/after snapshots of a chat's outputs directory, read on the host (the server's view of the
 * bind mount) instead of with extra execs. lstat/readdir never follow symlinks, so a link planted by
 * the sandbox cannot make the server walk outside the directory; links are not listed at all.
 */

/** relative path → "size:mtime" of every regular file. */
export type OutputsSnapshot = Map<string, string>

export const SNAPSHOT_MAX_ENTRIES = 2000

/** undefined when the directory is missing or holds more than `maxEntries` entries (§3.3: skipped). */
export async function snapshotOutputs (root: string, maxEntries = SNAPSHOT_MAX_ENTRIES): Promise<OutputsSnapshot | undefined> {
  const files: OutputsSnapshot = new Map()
  let seen = 0
  const queue: string[] = ['']
  while (queue.length > 0) {
    const rel = queue.shift() as string
    // An unreadable subdirectory (the sandbox may chmod its own dirs) is skipped; a missing root means no snapshot.
    const entries = await readdir(join(root, rel), { withFileTypes: true }).catch(() => undefined)
    if (entries === undefined) {
      if (rel === '') return undefined
      continue
    }
    for (const entry of entries) {
      if (++seen > maxEntries) return undefined
      const child = rel === '' ? entry.name : `${rel}/${entry.name}`
      if (entry.isDirectory()) queue.push(child)
      else if (entry.isFile()) {
        const st = await lstat(join(root, child)).catch(() => undefined)
        if (st?.isFile() === true) files.set(child, `${st.size}:${st.mtimeMs}`)
      }
    }
  }
  return files
}

/** Files that are new or changed in `after`, sorted by path. */
export function changedOutputs (before: OutputsSnapshot, after: OutputsSnapshot): string[] {
  const changed: string[] = []
  for (const [rel, sig] of after) if (before.get(rel) !== sig) changed.push(rel)
  return changed.sort()
}
