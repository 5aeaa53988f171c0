/** The few fields of a walked file the listing keeps (no absolute path, no derived strings). */
export interface Kept { relPath: string, size: number, mtimeMs: number }

/** Listing order (docs/contract.md#outputs-listing): newest first, ties by path so the order is stable. */
export function newerFirst (a: Kept, b: Kept): number {
  return b.mtimeMs - a.mtimeMs || (a.relPath < b.relPath ? -1 : a.relPath > b.relPath ? 1 : 0)
}

/**
 * Keeps the `capacity` newest of everything offered: a binary min-heap whose root is the oldest kept
 * entry. Memory is O(capacity) however many files a walk visits; each offer costs O(log capacity).
 */
export class NewestHeap {
  private readonly heap: Kept[] = []
  /** Entries offered that were older than everything kept (or pushed out later). */
  dropped = 0

  constructor (private readonly capacity: number) {}

  offer (entry: Kept): void {
    const { heap } = this
    if (heap.length < this.capacity) {
      heap.push(entry)
      this.up(heap.length - 1)
      return
    }
    this.dropped++
    const oldest = heap[0]
    if (oldest === undefined || newerFirst(entry, oldest) >= 0) return
    heap[0] = entry
    this.down(0)
  }

  /** The kept entries, newest first. */
  sorted (): Kept[] {
    return [...this.heap].sort(newerFirst)
  }

  // "Older" (sorts later) entries move to the root.
  private older (i: number, j: number): boolean {
    return newerFirst(this.heap[i] as Kept, this.heap[j] as Kept) > 0
  }

  private swap (i: number, j: number): void {
    const { heap } = this
    const tmp = heap[i] as Kept
    heap[i] = heap[j] as Kept
    heap[j] = tmp
  }

  private up (i: number): void {
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (!this.older(i, parent)) return
      this.swap(i, parent)
      i = parent
    }
  }

  private down (i: number): void {
    const n = this.heap.length
    for (;;) {
      const left = 2 * i + 1
      const right = left + 1
      let oldest = i
      if (left < n && this.older(left, oldest)) oldest = left
      if (right < n && this.older(right, oldest)) oldest = right
      if (oldest === i) return
      this.swap(i, oldest)
      i = oldest
    }
  }
}
