import { constants, type Dir } from 'node:fs'
import { lstat, open, opendir, type FileHandle } from 'node:fs/promises'

/*
 * Server-side measure of a directory the sandbox writes (a chat's outputs, chat-storage `usage`): bytes allocated on disk
 * (st_blocks × 512, so sparse files count what they really use, hard links once). The sandbox may
 * swap any directory for a symlink while we walk, so every directory is opened O_NOFOLLOW and its
 * entries are read and lstat'ed through /proc/self/fd/<fd>/…, relative to the descriptor: a swap
 * makes the open fail (ELOOP) instead of leading the walk elsewhere. Bounded in entries, depth and
 * open descriptors; past a bound the result is a lower bound (`complete: false`).
 */

export interface TreeUsage { bytes: number, entries: number, complete: boolean }

export interface TreeLimits {
  /** entries visited at most */
  maxEntries: number
  /** stop as soon as the total exceeds this (the caller only needs to know it is over) */
  stopAbove?: number
  /** directory depth followed at most (also the bound of open descriptors) */
  maxDepth?: number
}

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW
const BATCH = 32

interface Walk { bytes: number, entries: number, complete: boolean, inodes: Set<string>, limits: Required<TreeLimits> }

const over = (w: Walk): boolean => w.entries >= w.limits.maxEntries || w.bytes > w.limits.stopAbove

/** Usage of `root` (0 when it does not exist). Never throws for what the tree contains. */
export async function treeUsage (root: string, limits: TreeLimits): Promise<TreeUsage> {
  const w: Walk = {
    bytes: 0,
    entries: 0,
    complete: true,
    inodes: new Set(),
    limits: { maxDepth: 32, stopAbove: Number.POSITIVE_INFINITY, ...limits }
  }
  let dir: FileHandle
  try {
    dir = await open(root, DIR_FLAGS)
  } catch { return { bytes: 0, entries: 0, complete: true } }
  try {
    await walkDir(dir, 0, w)
  } finally { await dir.close() }
  return { bytes: w.bytes, entries: w.entries, complete: w.complete && !over(w) }
}

async function walkDir (dir: FileHandle, depth: number, w: Walk): Promise<void> {
  const base = `/proc/self/fd/${dir.fd}`
  let list: Dir
  try {
    list = await opendir(base, { bufferSize: BATCH })
  } catch { w.complete = false; return }
  // Names are read in batches (never the whole directory at once) and the walk stops at its bounds.
  const subdirs: string[] = []
  try {
    let batch: string[] = []
    for await (const d of list) {
      batch.push(d.name)
      if (batch.length < BATCH) continue
      await measure(base, batch, subdirs, w)
      batch = []
      if (over(w)) { w.complete = false; return }
    }
    await measure(base, batch, subdirs, w)
  } catch { w.complete = false }
  for (const name of subdirs) {
    if (over(w)) { w.complete = false; return }
    if (depth + 1 > w.limits.maxDepth) { w.complete = false; continue }
    let child: FileHandle
    try {
      child = await open(`${base}/${name}`, DIR_FLAGS)
    } catch { continue }
    try {
      await walkDir(child, depth + 1, w)
    } finally { await child.close() }
  }
}

/** lstat of a batch of names relative to the directory's descriptor; directories are queued. */
async function measure (base: string, names: string[], subdirs: string[], w: Walk): Promise<void> {
  w.entries += names.length
  const stats = await Promise.all(names.map(async name => await lstat(`${base}/${name}`).catch(() => null)))
  for (let j = 0; j < names.length; j++) {
    const st = stats[j]
    if (st === null || st === undefined) continue
    if (st.nlink > 1 && !st.isDirectory()) {
      const key = `${st.dev}:${st.ino}`
      if (w.inodes.has(key)) continue
      if (w.inodes.size < 100_000) w.inodes.add(key)
    }
    w.bytes += st.blocks * 512
    if (st.isDirectory() && subdirs.length < w.limits.maxEntries) subdirs.push(names[j] as string)
  }
}
