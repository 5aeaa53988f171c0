/*
 * Counting semaphores for the heavy routes (listing walks, archives). A request waits at most `waitMs`
 * for a slot and the queue is bounded, so a burst of requests costs a bounded number of parked promises
 * and never an unbounded amount of I/O; a request that gets no slot is answered busy by the caller.
 */

/** Gives the slot back; calling it more than once is harmless. */
export type Release = () => void

export interface Slots {
  /** A release function once a slot is free, or undefined after `waitMs` or when the queue is full. */
  acquire: (waitMs: number) => Promise<Release | undefined>
  readonly active: number
  readonly waiting: number
}

interface Waiter { grant: (release: Release) => void, timer: NodeJS.Timeout }

export function createSlots (max: number, maxQueue: number): Slots {
  let active = 0
  const queue: Waiter[] = []

  function issue (): Release {
    active++
    let released = false
    return () => {
      if (released) return
      released = true
      active--
      const next = queue.shift()
      if (next !== undefined) {
        clearTimeout(next.timer)
        next.grant(issue())
      }
    }
  }

  return {
    async acquire (waitMs) {
      if (active < max && queue.length === 0) return issue()
      if (queue.length >= maxQueue || waitMs <= 0) return undefined
      return await new Promise<Release | undefined>(resolve => {
        // Not unref'd: the wait is bounded, and a caller awaiting it must get its answer.
        const waiter: Waiter = {
          grant: resolve,
          timer: setTimeout(() => {
            const at = queue.indexOf(waiter)
            if (at !== -1) queue.splice(at, 1)
            resolve(undefined)
          }, waitMs)
        }
        queue.push(waiter)
      })
    },
    get active () { return active },
    get waiting () { return queue.length }
  }
}

export interface KeyedSlots {
  /** As Slots.acquire, with `max` slots per key; a key's state is dropped when it is idle. */
  acquire: (key: string, waitMs: number) => Promise<Release | undefined>
  /** Keys with a slot held or a request waiting (bounded by the concurrent requests). */
  readonly size: number
}

export function createKeyedSlots (max: number, maxQueue: number): KeyedSlots {
  const byKey = new Map<string, Slots>()
  const forget = (key: string, slots: Slots): void => {
    if (slots.active === 0 && slots.waiting === 0 && byKey.get(key) === slots) byKey.delete(key)
  }
  return {
    async acquire (key, waitMs) {
      let slots = byKey.get(key)
      if (slots === undefined) {
        slots = createSlots(max, maxQueue)
        byKey.set(key, slots)
      }
      const own = slots
      const release = await own.acquire(waitMs)
      if (release === undefined) {
        forget(key, own)
        return undefined
      }
      return () => { release(); forget(key, own) }
    },
    get size () { return byKey.size }
  }
}
