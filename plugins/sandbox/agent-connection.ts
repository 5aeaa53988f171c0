import type { AgentPipe } from './agent-link.js'
import { encodeFrame, ProtocolError, T_CLOSE, T_EXIT, T_FAIL, T_RESULT } from './agent-protocol.js'

/*
 * One agent stream's requests (agent-client.ts opens it): multiplexed by id, what comes for an id that
 * is not in flight closes the stream, and the per-sandbox state of the connection and its backoff.
 */

/** Ids the server gave up on (CLOSE sent) whose last frame has not come yet; beyond this the oldest is forgotten. */
const MAX_CLOSING = 1024
/** The last frame of a request: after it the id is no longer in flight. */
const LAST_FRAME = new Set([T_EXIT, T_FAIL, T_RESULT])

export interface AgentHandler {
  /** A frame for this request. Throwing ProtocolError closes the whole stream (the agent lied). */
  frame: (type: number, payload: Buffer) => void
  /** The stream ended (or was closed) before the request was done. */
  lost: () => void
}

/**
 * Per sandbox: on Entry.agent for a chat's, on PoolSlot.agent for a warm pool sandbox (opened when it
 * became ready, handed to the chat that claims it): the open connection and the backoff after failures.
 */
export interface AgentState {
  sandboxId: string
  /** who it serves, for the log: the chat key, or `pool-{slot}` until claimed */
  owner: string
  /** the sandbox went away or got another agent state: never opened again, its end not a failure */
  dropped: boolean
  conn: AgentConnection | null
  opening: Promise<AgentConnection | null> | null
  /** consecutive failures (no hello, protocol errors, short-lived connections) */
  failures: number
  retryAt: number
  /** this container's image has no agent: plain docker exec for good */
  missing: boolean
}

export class AgentConnection {
  private readonly handlers = new Map<number, AgentHandler>()
  /** ids finished by the server before the agent's last frame: what still comes for them is dropped */
  private readonly closing = new Set<number>()
  /** the id whose last frame is being handled */
  private answered: number | undefined
  private nextId = 1
  closed = false
  failed: string | undefined
  /** the agent said it serves CONNECT (its HELLO): older images' agents ignore the request */
  canConnect = false
  /** the agent said it answers an EXEC whose process started with SPAWNED first (its HELLO): older images' agents never do */
  acksSpawn = false
  /** the user and group the agent runs commands as (its HELLO; older images' agents do not say): the ready probe's ids */
  ids: { uid: number, gid: number } | undefined
  /** bytes of flow-controlled frames (agent-connect.ts) read since the stream's budget last asked: not charged to it */
  exempt = 0

  constructor (private readonly socket: AgentPipe, private readonly onClosed: (conn: AgentConnection) => void) {}

  /** Registers a handler and sends its first frame (built by `first` with the new id). */
  request (first: (id: number) => Buffer, handler: AgentHandler): number {
    const id = this.nextId
    this.nextId = this.nextId >= 0xfffffffe ? 1 : this.nextId + 1
    if (this.closed) { queueMicrotask(handler.lost); return id }
    this.closing.delete(id)
    this.handlers.set(id, handler)
    this.socket.write(first(id))
    return id
  }

  send (frame: Buffer): void {
    if (!this.closed) this.socket.write(frame)
  }

  /**
   * The caller is done with the request: forget it and tell the agent to stop its output. Until the
   * agent's last frame for it (EXIT, FAIL, RESULT) its frames are dropped; after that they are a violation.
   */
  finish (id: number): void {
    if (!this.handlers.delete(id) || this.closed || id === this.answered) return
    this.closing.add(id)
    if (this.closing.size > MAX_CLOSING) this.closing.delete(this.closing.values().next().value as number)
    this.socket.write(encodeFrame(id, T_CLOSE))
  }

  get pending (): number { return this.handlers.size }

  /**
   * A frame from the agent. Throws ProtocolError (the stream is then closed) for an id that is not in
   * flight: never issued, already answered to the end, or forgotten.
   */
  dispatch (id: number, type: number, payload: Buffer): void {
    const last = LAST_FRAME.has(type)
    const h = this.handlers.get(id)
    if (h === undefined) {
      if (!this.closing.has(id)) throw new ProtocolError(`frame for id ${id}, which is not in flight`)
      if (last) this.closing.delete(id)
      return
    }
    if (!last) { h.frame(type, payload); return }
    // The agent is done with the id: the handler's finish() needs no CLOSE. Should the handler
    // throw, it stays registered, so that closing the stream tells it the call was lost.
    this.answered = id
    try { h.frame(type, payload) } finally { this.answered = undefined }
    this.handlers.delete(id)
  }

  close (reason?: string): void {
    if (this.closed) return
    this.closed = true
    if (reason !== undefined) this.failed = reason
    this.socket.destroy()
    this.closing.clear()
    const lost = [...this.handlers.values()]
    this.handlers.clear()
    for (const h of lost) { try { h.lost() } catch {} }
    this.onClosed(this)
  }
}

export function newAgentState (sandboxId: string, owner: string): AgentState {
  return { sandboxId, owner, dropped: false, conn: null, opening: null, failures: 0, retryAt: 0, missing: false }
}

/** The sandbox is gone or is served by another state: close the connection, open no other. */
export function dropAgent (st: AgentState | undefined): void {
  if (st === undefined) return
  st.dropped = true
  st.conn?.close()
}
