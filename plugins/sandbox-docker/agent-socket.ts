import type { Socket } from 'node:net'
import { admit, FRESH_WAIT_MS } from './agent-admission.js'
import { SlotListener } from './agent-listener.js'
import type { RunDirs } from './agent-run-dir.js'
import { loadKey, newSlot, setFresh, until, wake, type Slot } from './agent-slot.js'

export { FRESH_WAIT_MS } from './agent-admission.js'

/*
 * The engine's end of the agent socket (docs/engine.md#the-agent-socket), per sandbox: the server listens
 * on `agent.sock` in the sandbox's run directory (agent-run-dir.ts, agent-listener.ts), which the sandbox
 * sees read-only: it cannot remove, replace or plant anything there, and sees no other sandbox's socket.
 * Who gets in is agent-admission.ts's business. This file keeps the slots (agent-slot.ts) and drives them
 * through the sandbox's life: a start opens the window for one fresh agent, the first exec waits for that
 * window to close (until then nothing but the entrypoint's agent can run in the sandbox: every other
 * process enters through an exec), a restarted server listens again for a running sandbox's agent, the
 * core asks for the authenticated connection, a removal deletes the run directory.
 */

/** Windows that closed without a fresh agent, in a row, before the engine stops mounting the socket (a host where it cannot work). */
const MAX_MISSES = 3

export interface AgentSocketLog { warn: (obj: object, msg: string) => void, debug: (obj: object, msg: string) => void }

export class AgentSockets {
  private readonly slots = new Map<string, Slot>()
  private readonly listener: SlotListener
  private misses = 0
  private closed = false
  disabled = false

  constructor (readonly dirs: RunDirs, private readonly log: AgentSocketLog) {
    this.listener = new SlotListener(dirs, log, (s, sock) => { admit(s, sock, dirs, log, () => { this.misses = 0 }) })
  }

  /** The sandbox's slot, made from its run token (the create, an inspect or a listing tells it). */
  note (id: string, token: string): Slot {
    let s = this.slots.get(id)
    if (s === undefined || s.token !== token) {
      if (s !== undefined) this.drop(s)
      s = newSlot(id, token)
      // After close, an inspect or listing of a call still finishing (a terminal's detach) must not listen
      // again: nothing would close that socket, and it kept the process alive.
      if (this.closed) { s.gone = true; return s }
      this.slots.set(id, s)
    }
    return s
  }

  known (id: string): Slot | undefined { return this.slots.get(id) }

  /** Every slot known now (sandboxes created, listed or inspected by this server). */
  all (): Slot[] { return [...this.slots.values()] }

  tokens (): Set<string> { return new Set([...this.slots.values()].map(s => s.token)) }

  /** A start is about to happen: the old agent and key are void, fresh candidates wait for its result. */
  async beforeStart (s: Slot): Promise<void> {
    setFresh(s, 'pending')
    s.key = null
    s.keyLoaded = true
    s.conn?.destroy()
    await this.dirs.dropKey(s.token)
    if (this.disabled || !await this.listener.listen(s)) setFresh(s, 'closed')
  }

  /** A running sandbox learnt from a listing (a restart): listen, so that its retrying agent comes back. */
  async watch (s: Slot): Promise<void> {
    if (s.server !== null || s.gone) return
    if (await this.listener.listen(s)) await loadKey(s, this.readKey)
  }

  /** The start's result: a real start (the sandbox was not running) opens the window for one fresh agent. */
  afterStart (s: Slot, started: boolean): void {
    if (!started || s.fresh !== 'pending') { setFresh(s, 'closed'); return }
    setFresh(s, 'open')
    s.freshTimer = setTimeout(() => {
      if (s.fresh !== 'open') return
      setFresh(s, 'closed')
      if (++this.misses >= MAX_MISSES && !this.disabled) {
        this.disabled = true
        this.log.warn({ misses: this.misses }, 'no sandbox agent came through its socket after starts; the engine starts agents over exec from now on (SANDBOX_AGENT_SOCKET=false says so at boot)')
      }
    }, FRESH_WAIT_MS)
    s.freshTimer.unref()
  }

  /** Before any exec: the fresh agent's window closes first (waiting for it a bounded time). */
  async beforeExec (id: string): Promise<void> {
    const s = this.slots.get(id)
    if (s === undefined || s.fresh === 'closed') return
    await until(s, () => s.fresh === 'closed', FRESH_WAIT_MS)
    setFresh(s, 'closed')
  }

  /** The authenticated connection to the sandbox's agent, waiting a bounded time for one expected; null: none. */
  async channel (s: Slot): Promise<Socket | null> {
    if (s.gone) return null
    if (s.fresh !== 'closed') await until(s, () => s.fresh === 'closed', FRESH_WAIT_MS)
    if (!await this.listener.listen(s)) return null
    await loadKey(s, this.readKey)
    const usable = (): boolean => s.conn !== null && !s.conn.destroyed && !s.given
    if (!usable() && s.key !== null && Date.now() < s.expectUntil) await until(s, usable, s.expectUntil - Date.now())
    if (!usable()) return null
    s.given = true
    return s.conn
  }

  /** The sandbox was removed: stop listening, delete its run directory. */
  async forget (id: string): Promise<void> {
    const s = this.slots.get(id)
    if (s === undefined) return
    this.drop(s)
    await this.dirs.remove(s.token)
  }

  close (): void {
    this.closed = true
    for (const s of this.slots.values()) this.drop(s)
  }

  private readonly readKey = async (token: string): Promise<Buffer | null> => await this.dirs.readKey(token)

  private drop (s: Slot): void {
    s.gone = true
    this.slots.delete(s.id)
    clearTimeout(s.freshTimer)
    clearTimeout(s.cooling)
    s.conn?.destroy()
    this.listener.stop(s)
    wake(s)
  }
}
