import { lstat, mkdir, readdir, rename, rm } from 'node:fs/promises'
import { setTimeout as sleep } from 'node:timers/promises'
import { join } from 'node:path'
import { errnoCode } from '../../core/errno.js'

/*
 * A warm pool slot's data areas on the local filesystem (docs/engine.md#storage): `pool/<slot>/{uploads,outputs}`
 * below DATA_DIR, the directories a pool sandbox mounts before any chat claims it, and what a claim does with
 * them: the slot's directories become the chat's with rename(2), so the running sandbox's mounts follow the
 * inodes. Another storage engine (a volume the server cannot see) implements the same service calls its own way.
 */

/** A pool slot id: 32 random hex digits (12 for slots made by earlier versions). */
export const SLOT = /^[0-9a-f]{12}(?:[0-9a-f]{20})?$/

const exists = async (p: string): Promise<boolean> => await lstat(p).then(() => true, () => false)
const isPart = (name: string): boolean => name.startsWith('.upload-') && name.endsWith('.part')

/** An upload is being written somewhere below `dir` (bounded scan, links not followed). */
async function uploading (dir: string, budget = { left: 2000 }): Promise<boolean> {
  let list
  try { list = await readdir(dir, { withFileTypes: true }) } catch { return false }
  for (const d of list) {
    if (--budget.left < 0) return false
    if (isPart(d.name)) return true
    if (d.isDirectory() && await uploading(join(dir, d.name), budget)) return true
  }
  return false
}

/**
 * Makes `from` (the directory the running sandbox has mounted) the directory at `to`: what `to` holds
 * already (uploads sent before the first tool call) moves into `from` entry by entry, then `from` replaces
 * the then empty `to` with one rename. Waits up to 5 s for uploads being written to land.
 */
async function adoptDir (from: string, to: string): Promise<void> {
  if (!await exists(from)) return
  for (let round = 0; ; round++) {
    if (round < 100 && await uploading(to)) { await sleep(50); continue }
    let names: string[] = []
    try { names = await readdir(to) } catch (err) { if (errnoCode(err) !== 'ENOENT') throw err }
    for (const name of names) {
      await rename(join(to, name), join(from, name)).catch((err: unknown) => { if (errnoCode(err) !== 'ENOENT') throw err })
    }
    try {
      await rename(from, to)
      return
    } catch (err) {
      const code = errnoCode(err)
      if ((code !== 'ENOTEMPTY' && code !== 'EEXIST') || round > 200) throw err
    }
  }
}

/**
 * The slot's uploads and outputs become the chat's (`chatDir`, created 0755 when missing), then the slot's
 * directory goes. Idempotent: a restart finishes an interrupted one; a slot already adopted is a no-op.
 */
export async function adoptSlot (slotDir: string, chatDir: string): Promise<void> {
  await mkdir(chatDir, { recursive: true, mode: 0o755 })
  await adoptDir(join(slotDir, 'uploads'), join(chatDir, 'uploads'))
  await adoptDir(join(slotDir, 'outputs'), join(chatDir, 'outputs'))
  await rm(slotDir, { recursive: true, force: true })
}

/** Whether the slot's directory is still there (a claim not finished yet). */
export async function slotExists (slotDir: string): Promise<boolean> {
  return await exists(slotDir)
}
