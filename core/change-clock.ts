/*
 * The clock of a file system's inode change times (ctime), read where a command's changes will be
 * stamped: a marker file of the server's is touched and its new ctime read back. A change made to any
 * file of that file system afterwards gets a ctime at least as late (the kernel stamps a change with its
 * coarse clock, or with a fine-grained time that raises a floor which later coarse stamps never fall
 * below), and nobody can set a ctime: utimensat(2) sets atime and mtime only, and a sandbox cannot set
 * the clock. So "ctime ≥ this reading" says "changed after it, or within the same clock tick before it".
 * The marker is touched twice: on a file system with multigrain timestamps (Linux 6.13 and later: ext4,
 * xfs, btrfs, tmpfs) a second change within one tick of a file whose ctime was read gets a fine-grained
 * stamp, later than every change before it, so only changes after the reading can be as late; elsewhere
 * the stamps are the tick's and the same-tick changes before the reading (at most a tick: 1–10 ms) are as late.
 *
 * Only for file systems of this kernel: on a network file system the stamp is the server's or the
 * writing client's clock (CephFS), which may disagree with the marker's, and a system call may wait for
 * the network; there the readers fall back to comparing snapshots.
 */
import { closeSync, constants, lstatSync, lutimesSync, openSync } from 'node:fs'
import { stat, statfs } from 'node:fs/promises'
import { errnoCode } from './errno.js'

/** statfs(2) f_type of the local file systems whose ctimes come from this kernel's clock. */
const LOCAL_TYPES = new Set([
  0xEF53, // ext2, ext3, ext4
  0x58465342, // xfs
  0x9123683E, // btrfs
  0x01021994, // tmpfs
  0xF2F52010, // f2fs
  0x2FC12FC1, // zfs
  0x794C7630 // overlayfs
])

/** The device of `path` when it is on a local file system (LOCAL_TYPES); undefined otherwise. */
export async function clockDevice (path: string): Promise<number | undefined> {
  const [info, fs] = await Promise.all([stat(path), statfs(path)])
  return LOCAL_TYPES.has(fs.type) ? info.dev : undefined
}

/**
 * Touches `marker` twice (a regular file of the server's on device `dev`, created 0600 when missing; a
 * symlink is never followed) and returns its new ctime (as fs.Stats.ctimeMs) when `area` is a directory on
 * the same device; undefined when it cannot tell (a missing parent, another device, any error).
 *
 * Synchronous on purpose: five system calls on a local file system (clockDevice said so), no thread-pool
 * round trip; bash_tool reads it before every command. A reading is safe even when something else touched
 * the marker after us: it is a stamp given before the read returned, so before the command starts.
 */
export function touchClock (marker: string, area: string, dev: number): number | undefined {
  try {
    const now = Date.now() / 1000
    try {
      lutimesSync(marker, now, now)
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT') return undefined
      closeSync(openSync(marker, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600))
    }
    // Read (so that the kernel knows the stamp was seen), then touched again: fine-grained where it can be.
    if (!lstatSync(marker).isFile()) return undefined
    lutimesSync(marker, now, now)
    const info = lstatSync(marker)
    if (!info.isFile() || info.dev !== dev) return undefined
    const dir = lstatSync(area)
    return dir.isDirectory() && dir.dev === dev ? info.ctimeMs : undefined
  } catch {
    return undefined
  }
}
