/*
 * How many pods the engine brings up at once (KUBE_MAX_STARTING; docs/kubernetes.md#settings). A burst of
 * new chats (bench (l): 200 at once) otherwise creates every pod at the same moment: the nodes' container
 * runtimes start them all in parallel, each slower than alone, and every start finishes late, past the
 * calls' creation budget. Queued in order of arrival, the first starts finish early and the rest follow at
 * the rate the nodes can create pods; waiting here costs nothing. 0 = no bound.
 */

export class StartQueue {
  #active = 0
  // A Set keeps insertion order: FIFO with O(1) removal of a waiter that left.
  readonly #queue = new Set<() => void>()

  constructor (readonly slots: number) {}

  get active (): number { return this.#active }
  get waiting (): number { return this.#queue.size }

  /** Runs `fn` once a slot is free. */
  async run<T> (fn: () => Promise<T>): Promise<T> {
    if (this.slots > 0) await this.#acquire()
    try { return await fn() } finally { if (this.slots > 0) this.#release() }
  }

  async #acquire (): Promise<void> {
    if (this.#active < this.slots && this.#queue.size === 0) { this.#active++; return }
    await new Promise<void>(resolve => { this.#queue.add(resolve) })
  }

  #release (): void {
    const next = this.#queue.values().next()
    if (next.done === true) { this.#active--; return }
    this.#queue.delete(next.value)
    next.value() // the slot passes to the next waiter as it is
  }
}
