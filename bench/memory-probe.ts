/*
 * Preloaded into the benched server (--import): on SIGUSR2 it writes the process's memory split
 * (RSS, V8 heap by space, external and array buffers) to $BENCH_MEMORY_FILE, and with
 * BENCH_HEAP_SNAPSHOT=1 a heap snapshot next to it (what dominates the heap, not a guess).
 */
import { writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import v8 from 'node:v8'

const file = process.env.BENCH_MEMORY_FILE
if (file !== undefined) {
  process.on('SIGUSR2', () => {
    const mem = process.memoryUsage()
    const spaces = Object.fromEntries(v8.getHeapSpaceStatistics().map(s => [s.space_name, s.space_used_size]))
    const snapshot = process.env.BENCH_HEAP_SNAPSHOT === '1' ? v8.writeHeapSnapshot(join(dirname(file), `server-${Date.now()}.heapsnapshot`)) : null
    writeFileSync(file, JSON.stringify({ ...mem, spaces, snapshot, handles: (process as unknown as { _getActiveHandles: () => unknown[] })._getActiveHandles().length }))
  })
}
