import { DockerError } from './docker-error.js'

/*
 * Backpressure in front of the engine: dockerd on a small host slows down for everyone
 * when it gets hundreds of requests at once, and a request that waits in dockerd counts against its
 * time-out. So the adapter sends at most N requests of a kind at once (a lane: container lifecycle,
 * exec set-up, reads) and queues the rest in order of arrival here, where waiting is cheap and
 * bounded: a waiter leaves the queue when its caller's deadline passes or its signal aborts (the
 * wait counts toward the caller's budget), with a busy DockerError that says so.
 * Identical reads in flight are shared (`Dedup`): 100 callers inspecting one container make one request.
 */

export interface Admission {
  /** absolute deadline (ms, Date.now clock) for the wait; undefined = the lane's own bound */
  deadline?: number
  signal?: AbortSignal
}

interface Waiter {
  grant: () => void
  fail: (err: Error) => void
}

export class Lane {
  readonly name: string
  readonly slots: number
  /** the longest wait for a slot when the caller gives no deadline (ms) */
  readonly maxWaitMs: number
  #active = 0
  // A Set keeps insertion order: FIFO with O(1) removal of a waiter that gave up.
  readonly #queue = new Set<Waiter>()

  constructor (name: string, slots: number, maxWaitMs: number) {
    this.name = name
    this.slots = Math.max(1, Math.floor(slots))
    this.maxWaitMs = maxWaitMs
  }

  get active (): number { return this.#active }
  get waiting (): number { return this.#queue.size }

  /** Resolves with the release function once a slot is free; rejects (busy) when the deadline passes or the signal aborts. */
  async acquire (admission: Admission = {}): Promise<() => void> {
    if (admission.signal?.aborted === true) throw this.#refusal('the call was cancelled while it waited for the engine')
    if (this.#active < this.slots && this.#queue.size === 0) return this.#take()
    const wait = Math.max(0, (admission.deadline ?? Date.now() + this.maxWaitMs) - Date.now())
    const ahead = this.#queue.size + this.#active
    return await new Promise<() => void>((resolve, reject) => {
      const done = (): void => {
        clearTimeout(timer)
        admission.signal?.removeEventListener('abort', onAbort)
        this.#queue.delete(waiter)
      }
      const waiter: Waiter = {
        grant: () => { done(); resolve(this.#take()) },
        fail: err => { done(); reject(err) }
      }
      const onAbort = (): void => { waiter.fail(this.#refusal('the call was cancelled while it waited for the engine')) }
      const timer = setTimeout(() => { waiter.fail(this.#refusal(`waited ${(wait / 1000).toFixed(1)} s behind ${ahead} engine requests`)) }, wait)
      this.#queue.add(waiter)
      admission.signal?.addEventListener('abort', onAbort, { once: true })
    })
  }

  #take (): () => void {
    this.#active++
    let released = false
    return () => {
      if (released) return
      released = true
      this.#active--
      const first = this.#queue.values().next()
      if (first.done !== true && this.#active < this.slots) first.value.grant()
    }
  }

  #refusal (why: string): DockerError {
    return new DockerError(`engine ${this.name} queue: ${why}`, undefined, false, undefined, true)
  }
}

/** Shares one in-flight promise among identical requests (same key); the next request after it settles runs again. */
export class Dedup {
  #inflight = new Map<string, Promise<unknown>>()

  async run<T> (key: string, fn: () => Promise<T>): Promise<T> {
    const running = this.#inflight.get(key)
    if (running !== undefined) return await (running as Promise<T>)
    const p = fn()
    this.#inflight.set(key, p)
    try { return await p } finally { this.#inflight.delete(key) }
  }

  get size (): number { return this.#inflight.size }
}
