import type { FileHandle } from 'node:fs/promises'
import type { Server, Socket } from 'node:net'

/*
 * One sandbox's agent socket as the engine keeps it (docs/engine.md#the-agent-socket): its run directory's
 * token, the listening server, the key, the fresh-agent window, the authenticated connection, and the
 * waiters woken whenever any of it changes. agent-socket.ts drives slots, agent-listener.ts listens for
 * them, agent-admission.ts lets agents in.
 */

/** The fresh-agent window: closed, waiting for a start's result (pending), or open for one fresh agent. */
export type Fresh = 'closed' | 'pending' | 'open'

export interface Slot {
  id: string
  token: string
  dir: FileHandle | null
  server: Server | null
  listening: Promise<boolean> | null
  key: Buffer | null
  /** the key file was read (adoption) */
  keyLoaded: boolean
  fresh: Fresh
  freshTimer: NodeJS.Timeout | undefined
  /** the authenticated connection (handed out at most once) */
  conn: Socket | null
  given: boolean
  /** until when a connection is expected (after a drop, or when listening anew) */
  expectUntil: number
  handshakes: number
  accepts: number[]
  cooling: NodeJS.Timeout | undefined
  waiters: Set<() => void>
  gone: boolean
  /** its run directory is not below this server's root (another server's sandbox) */
  foreign: boolean
}

export function newSlot (id: string, token: string): Slot {
  return { id, token, dir: null, server: null, listening: null, key: null, keyLoaded: false, fresh: 'closed', freshTimer: undefined, conn: null, given: false, expectUntil: 0, handshakes: 0, accepts: [], cooling: undefined, waiters: new Set(), gone: false, foreign: false }
}

/** Wakes every waiter of the slot (each checks its own condition). */
export function wake (s: Slot): void {
  for (const w of [...s.waiters]) w()
}

/** Waits until `done()` holds, the slot is gone, or `ms` passed. */
export async function until (s: Slot, done: () => boolean, ms: number): Promise<void> {
  if (done() || ms <= 0) return
  await new Promise<void>(resolve => {
    const check = (): void => { if (done() || s.gone) finish() }
    const finish = (): void => { clearTimeout(timer); s.waiters.delete(check); resolve() }
    const timer = setTimeout(finish, ms)
    s.waiters.add(check)
  })
}

export function setFresh (s: Slot, fresh: Fresh): void {
  if (fresh !== 'open') clearTimeout(s.freshTimer)
  s.fresh = fresh
  wake(s)
}

/** The slot's key, read from its run directory once (a sandbox this server adopted). */
export async function loadKey (s: Slot, readKey: (token: string) => Promise<Buffer | null>): Promise<void> {
  if (s.keyLoaded) return
  s.keyLoaded = true
  s.key ??= await readKey(s.token)
}
