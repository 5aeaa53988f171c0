import { randomBytes, timingSafeEqual } from 'node:crypto'
import { chmod, unlink, type FileHandle } from 'node:fs/promises'
import { createServer, type Server, type Socket } from 'node:net'
import { greeting, keyReply, NONCE, proofOf, readAnswer, resumeReply, type Answer } from './agent-handshake.js'
import { KEY_BYTES, RunDirs, SOCKET_NAME } from './agent-run-dir.js'

/*
 * The engine's end of the agent socket (docs/engine.md#the-agent-socket). Per sandbox the server listens
 * on `agent.sock` in the sandbox's run directory (agent-run-dir.ts), which the sandbox sees read-only:
 * it cannot remove, replace or plant anything there, and sees no other sandbox's socket. Whoever
 * connects is untrusted until the handshake (agent-handshake.ts): the engine sends a nonce; a *fresh* agent (no key yet)
 * is accepted only once per start of the sandbox, between the start and the first exec, which is
 * when nothing but the entrypoint's agent can run in it (every other process enters through an exec,
 * and exec waits for this window to close); it gets a new key, kept on the host. Any later
 * connection must prove that key (HMAC of the nonce): the agent holds it in its non-dumpable memory,
 * so an `assistant` process that killed the agent cannot take its place. While an agent is connected
 * nobody else is even greeted. At most two handshakes run at once, and a sandbox that connects too often stops
 * being listened to for a while: a connect loop costs the server little and only that sandbox's agent.
 */

const HANDSHAKE_MS = 3000
/** How long after a start the first exec waits for the fresh agent (python's start: seconds under load). */
export const FRESH_WAIT_MS = 10_000
/** How long a channel request waits for an agent expected back (after a drop, or when listening anew): its retries top at 2 s. */
const RECONNECT_WAIT_MS = 2500
const MAX_HANDSHAKES = 2
const ACCEPTS = 20
const ACCEPT_WINDOW_MS = 10_000
const COOLDOWN_MS = 30_000
/** Windows that closed without a fresh agent, in a row, before the engine stops mounting the socket (a host where it cannot work). */
const MAX_MISSES = 3

type Fresh = 'closed' | 'pending' | 'open'

interface Slot {
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

export interface AgentSocketLog { warn: (obj: object, msg: string) => void, debug: (obj: object, msg: string) => void }

export class AgentSockets {
  private readonly slots = new Map<string, Slot>()
  private misses = 0
  disabled = false

  constructor (readonly dirs: RunDirs, private readonly log: AgentSocketLog) {}

  /** The sandbox's slot, made from its run token (the create, an inspect or a listing tells it). */
  note (id: string, token: string): Slot {
    let s = this.slots.get(id)
    if (s === undefined || s.token !== token) {
      if (s !== undefined) this.drop(s)
      s = { id, token, dir: null, server: null, listening: null, key: null, keyLoaded: false, fresh: 'closed', freshTimer: undefined, conn: null, given: false, expectUntil: 0, handshakes: 0, accepts: [], cooling: undefined, waiters: new Set(), gone: false, foreign: false }
      this.slots.set(id, s)
    }
    return s
  }

  known (id: string): Slot | undefined { return this.slots.get(id) }

  tokens (): Set<string> { return new Set([...this.slots.values()].map(s => s.token)) }

  /** A start is about to happen: the old agent and key are void, fresh candidates wait for its result. */
  async beforeStart (s: Slot): Promise<void> {
    this.setFresh(s, 'pending')
    s.key = null
    s.keyLoaded = true
    s.conn?.destroy()
    await this.dirs.dropKey(s.token)
    if (this.disabled || !await this.listen(s)) this.setFresh(s, 'closed')
  }

  /** A running sandbox learnt from a listing (a restart): listen, so that its retrying agent comes back. */
  async watch (s: Slot): Promise<void> {
    if (s.server !== null || s.gone) return
    if (await this.listen(s) && !s.keyLoaded) {
      s.keyLoaded = true
      s.key ??= await this.dirs.readKey(s.token)
    }
  }

  /** The start's result: a real start (the sandbox was not running) opens the window for one fresh agent. */
  afterStart (s: Slot, started: boolean): void {
    if (!started || s.fresh !== 'pending') { this.setFresh(s, 'closed'); return }
    this.setFresh(s, 'open')
    s.freshTimer = setTimeout(() => {
      if (s.fresh !== 'open') return
      this.setFresh(s, 'closed')
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
    await this.until(s, () => s.fresh === 'closed', FRESH_WAIT_MS)
    this.setFresh(s, 'closed')
  }

  /** The authenticated connection to the sandbox's agent, waiting a bounded time for one expected; null: none. */
  async channel (s: Slot): Promise<Socket | null> {
    if (s.gone) return null
    if (s.fresh !== 'closed') await this.until(s, () => s.fresh === 'closed', FRESH_WAIT_MS)
    if (!await this.listen(s)) return null
    if (!s.keyLoaded) {
      s.keyLoaded = true
      s.key ??= await this.dirs.readKey(s.token)
    }
    const usable = (): boolean => s.conn !== null && !s.conn.destroyed && !s.given
    if (!usable() && s.key !== null && Date.now() < s.expectUntil) await this.until(s, usable, s.expectUntil - Date.now())
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
    for (const s of this.slots.values()) this.drop(s)
  }

  private drop (s: Slot): void {
    s.gone = true
    this.slots.delete(s.id)
    clearTimeout(s.freshTimer)
    clearTimeout(s.cooling)
    s.conn?.destroy()
    this.stopListening(s)
    this.wake(s)
  }

  private setFresh (s: Slot, fresh: Fresh): void {
    if (fresh !== 'open') clearTimeout(s.freshTimer)
    s.fresh = fresh
    this.wake(s)
  }

  private wake (s: Slot): void {
    for (const w of [...s.waiters]) w()
  }

  private async until (s: Slot, done: () => boolean, ms: number): Promise<void> {
    if (done() || ms <= 0) return
    await new Promise<void>(resolve => {
      const check = (): void => { if (done() || s.gone) finish() }
      const finish = (): void => { clearTimeout(timer); s.waiters.delete(check); resolve() }
      const timer = setTimeout(finish, ms)
      s.waiters.add(check)
    })
  }

  /** Listens on the sandbox's socket unless it does already; false when its run directory is not ours (or cooling down). */
  private async listen (s: Slot): Promise<boolean> {
    if (s.server !== null) return true
    if (s.gone || s.foreign || s.cooling !== undefined) return false
    s.listening ??= this.bind(s).finally(() => { s.listening = null })
    return await s.listening
  }

  private async bind (s: Slot): Promise<boolean> {
    let dir: FileHandle
    try { dir = await this.dirs.openSocketDir(s.token) } catch { s.foreign = true; return false }
    const path = `/proc/self/fd/${dir.fd}/${SOCKET_NAME}`
    const server = createServer({ pauseOnConnect: true }, sock => { this.greet(s, sock) })
    try {
      // A socket left by a former server process: only the server ever writes in this directory.
      await unlink(path).catch(() => {})
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject)
        server.listen(path, () => { server.off('error', reject); resolve() })
      })
      // Connectable by the sandbox's user (the directory is read-only to it, and mounted into that sandbox only).
      await chmod(path, 0o666)
    } catch (err) {
      server.close()
      await dir.close()
      this.log.warn({ err, sandboxId: s.id }, 'cannot listen on the sandbox agent socket; its agent runs over exec')
      return false
    }
    if (s.gone) { server.close(); await dir.close(); return false }
    server.on('error', () => {})
    s.server = server
    s.dir = dir
    if (s.key !== null || !s.keyLoaded) s.expectUntil = Date.now() + RECONNECT_WAIT_MS
    return true
  }

  private stopListening (s: Slot): void {
    const { server, dir } = s
    s.server = null
    s.dir = null
    // close() unlinks the socket through /proc/self/fd/N: the descriptor is closed only after it.
    server?.close()
    void dir?.close().catch(() => {})
  }

  private greet (s: Slot, sock: Socket): void {
    sock.on('error', () => {})
    const now = Date.now()
    s.accepts = s.accepts.filter(t => now - t < ACCEPT_WINDOW_MS)
    s.accepts.push(now)
    if (s.accepts.length > ACCEPTS) {
      sock.destroy()
      this.coolDown(s)
      return
    }
    if ((s.conn !== null && !s.conn.destroyed) || s.handshakes >= MAX_HANDSHAKES) { sock.destroy(); return }
    s.handshakes++
    const nonce = randomBytes(NONCE)
    sock.write(greeting(nonce))
    void (async () => {
      let reply: Buffer | null = null
      try {
        const answer = await readAnswer(sock, HANDSHAKE_MS)
        if (answer !== null) reply = await this.verdict(s, nonce, answer)
      } catch {} finally { s.handshakes-- }
      if (reply === null || sock.destroyed) {
        sock.destroy()
        this.wake(s)
        return
      }
      sock.write(reply)
      this.adopt(s, sock)
    })()
  }

  /** What to answer, or null to refuse. */
  private async verdict (s: Slot, nonce: Buffer, answer: Answer): Promise<Buffer | null> {
    if (answer.fresh) { // once per start, before the first exec
      if (s.fresh === 'pending') await this.until(s, () => s.fresh !== 'pending', FRESH_WAIT_MS)
      if (s.fresh !== 'open' || s.gone) return null
      // Closed without waking the waiters: they wake when the connection is adopted (or the handshake fails).
      clearTimeout(s.freshTimer)
      s.fresh = 'closed'
      this.misses = 0
      const key = randomBytes(KEY_BYTES)
      s.key = key
      s.expectUntil = Date.now() + RECONNECT_WAIT_MS
      await this.dirs.writeKey(s.token, key)
      return keyReply(key)
    }
    // An agent of this start, back.
    if (!s.keyLoaded) { s.keyLoaded = true; s.key ??= await this.dirs.readKey(s.token) }
    if (s.key === null || !timingSafeEqual(proofOf(s.key, nonce), answer.proof)) return null
    return resumeReply()
  }

  private adopt (s: Slot, sock: Socket): void {
    if (s.gone) { sock.destroy(); return }
    s.conn?.destroy()
    s.conn = sock
    s.given = false
    sock.once('close', () => {
      if (s.conn !== sock) return
      s.conn = null
      s.expectUntil = Date.now() + RECONNECT_WAIT_MS
    })
    this.log.debug({ sandboxId: s.id }, 'sandbox agent connected through its socket')
    this.wake(s)
  }

  private coolDown (s: Slot): void {
    if (s.cooling !== undefined) return
    this.log.warn({ sandboxId: s.id }, 'too many connections to a sandbox agent socket; not listening for a while')
    this.stopListening(s)
    s.cooling = setTimeout(() => { s.cooling = undefined }, COOLDOWN_MS)
    s.cooling.unref()
  }
}
