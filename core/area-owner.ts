import { constants } from 'node:fs'
import { open } from 'node:fs/promises'
import { errnoCode } from './errno.js'
import { areaDirs, type StorageOwner } from './storage-layout.js'

/*
 * Giving a sandbox's writable data area (outputs, core/storage-layout.ts) to the sandbox user, for the engines
 * whose areas are host directories the server also sees (Docker's bind-mount sources, the Kubernetes engine's
 * shared claim): the engine's business, not the core's (docs/engine.md#storage). By descriptor: the
 * directory is opened O_NOFOLLOW and changed with fchown, so nothing the sandbox did inside it (it sees only
 * the directory's contents, never its entry) can turn the change elsewhere.
 */

/** The sandbox user a data area is given to. */
export interface AreaIds { uid: number, gid: number }

/**
 * Gives `{root}/…/{owner}/outputs` to `ids` (unchanged when it has them). False when the server may not
 * (EPERM: it is not root); a missing directory or one that is not a real directory throws.
 */
export async function giveOutputsDir (root: string, owner: StorageOwner, ids: AreaIds): Promise<boolean> {
  if (!Number.isInteger(ids.uid) || !Number.isInteger(ids.gid) || ids.uid < 0 || ids.gid < 0) throw new TypeError('not a uid/gid pair')
  const handle = await open(areaDirs(root, owner).outputs, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW)
  try {
    const st = await handle.stat()
    if (st.uid === ids.uid && st.gid === ids.gid) return true
    try {
      await handle.chown(ids.uid, ids.gid)
      return true
    } catch (err) {
      if (errnoCode(err) === 'EPERM') return false
      throw err
    }
  } finally { await handle.close() }
}
