import { changed, mapError, withLock, type Entry, type Registry } from './registry.js'

/**
 * Kills the chat's container under its lock and marks the sandbox stopped but recoverable: files stay,
 * processes are lost, the next ensure() starts it again. Shared by the saturation restart and the disk
 * watchdog. Rejects with the mapped engine error.
 */
export async function killKeepingFiles (reg: Registry, entry: Entry): Promise<void> {
  await withLock(entry, async () => {
    try {
      await reg.engine.kill(entry.sandboxId ?? entry.names.container)
    } catch (err) { throw mapError(reg, err) }
    entry.state = 'stopped'
    entry.recoverable = true
    changed(reg, entry)
  })
}
