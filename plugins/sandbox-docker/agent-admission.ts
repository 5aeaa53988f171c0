import { randomBytes, timingSafeEqual } from 'node:crypto'
import type { Socket } from 'node:net'
import { greeting, keyReply, NONCE, proofOf, readAnswer, resumeReply, type Answer } from './agent-handshake.js'
import { KEY_BYTES, type RunDirs } from './agent-run-dir.js'
import { RECONNECT_WAIT_MS } from './agent-listener.js'
import { loadKey, until, wake, type Slot } from './agent-slot.js'

/*
 * Who gets in through a sandbox's agent socket (docs/engine.md#the-agent-socket). Whoever connects is
 * untrusted until the handshake (agent-handshake.ts): the engine sends a nonce; a *fresh* agent (no key
 * yet) is accepted only once per start of the sandbox, while its fresh window is open (between the
 * start and the first exec, when nothing but the entrypoint's agent can run in it), and gets a new key,
 * kept on the host. Any later connection must prove that key (HMAC of the nonce): the agent holds it in
 * its non-dumpable memory, so an `assistant` process that killed the agent cannot take its place. While
 * an agent is connected nobody else is even greeted, and at most two handshakes run at once.
 */

const HANDSHAKE_MS = 3000
/** How long after a start the first exec waits for the fresh agent (python's start: seconds under load). */
export const FRESH_WAIT_MS = 10_000
const MAX_HANDSHAKES = 2

export interface AdmissionLog { debug: (obj: object, msg: string) => void }

/**
 * Greets a connection the listener let through and adopts it as the slot's agent when it passes.
 * `onFresh` is told when a fresh agent was let in.
 */
export function admit (s: Slot, sock: Socket, dirs: RunDirs, log: AdmissionLog, onFresh: () => void): void {
  if ((s.conn !== null && !s.conn.destroyed) || s.handshakes >= MAX_HANDSHAKES) { sock.destroy(); return }
  s.handshakes++
  const nonce = randomBytes(NONCE)
  sock.write(greeting(nonce))
  void (async () => {
    let reply: Buffer | null = null
    try {
      const answer = await readAnswer(sock, HANDSHAKE_MS)
      if (answer !== null) reply = await verdict(s, nonce, answer, dirs, onFresh)
    } catch {} finally { s.handshakes-- }
    if (reply === null || sock.destroyed) {
      sock.destroy()
      wake(s)
      return
    }
    sock.write(reply)
    adopt(s, sock, log)
  })()
}

/** What to answer, or null to refuse. */
async function verdict (s: Slot, nonce: Buffer, answer: Answer, dirs: RunDirs, onFresh: () => void): Promise<Buffer | null> {
  if (answer.fresh) { // once per start, before the first exec
    if (s.fresh === 'pending') await until(s, () => s.fresh !== 'pending', FRESH_WAIT_MS)
    if (s.fresh !== 'open' || s.gone) return null
    // Closed without waking the waiters: they wake when the connection is adopted (or the handshake fails).
    clearTimeout(s.freshTimer)
    s.fresh = 'closed'
    onFresh()
    const key = randomBytes(KEY_BYTES)
    s.key = key
    s.expectUntil = Date.now() + RECONNECT_WAIT_MS
    await dirs.writeKey(s.token, key)
    return keyReply(key)
  }
  // An agent of this start, back.
  await loadKey(s, async token => await dirs.readKey(token))
  if (s.key === null || !timingSafeEqual(proofOf(s.key, nonce), answer.proof)) return null
  return resumeReply()
}

function adopt (s: Slot, sock: Socket, log: AdmissionLog): void {
  if (s.gone) { sock.destroy(); return }
  s.conn?.destroy()
  s.conn = sock
  s.given = false
  sock.once('close', () => {
    if (s.conn !== sock) return
    s.conn = null
    s.expectUntil = Date.now() + RECONNECT_WAIT_MS
  })
  log.debug({ sandboxId: s.id }, 'sandbox agent connected through its socket')
  wake(s)
}
