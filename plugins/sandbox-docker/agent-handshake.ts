import { createHmac } from 'node:crypto'
import type { Socket } from 'node:net'

/*
 * The agent socket's handshake on the wire (sandbox-image/agent/cubicle_socket.py is the other end;
 * docs/engine.md#the-agent-socket): the engine greets with MAGIC and a 32-byte nonce, the agent answers
 * with one byte ('F' fresh, 'R' resume) and 32 bytes (zeros, or HMAC-SHA256 of the nonce under its
 * key), the engine replies 'K' + a new key or 'O' + zeros, or closes. Every message has a fixed size:
 * the answer is read with read(n), and a byte more, a short answer or an unknown mode is a refusal.
 */

export const MAGIC = Buffer.from('CUBA\u0001', 'latin1')
export const NONCE = 32
const ANSWER = 1 + NONCE
const FRESH = 0x46
const RESUME = 0x52

export interface Answer {
  /** the agent holds no key yet */
  fresh: boolean
  proof: Buffer
}

export const greeting = (nonce: Buffer): Buffer => Buffer.concat([MAGIC, nonce])
export const proofOf = (key: Buffer, nonce: Buffer): Buffer => createHmac('sha256', key).update(nonce).digest()
export const keyReply = (key: Buffer): Buffer => Buffer.concat([Buffer.from('K'), key])
export const resumeReply = (): Buffer => Buffer.concat([Buffer.from('O'), Buffer.alloc(NONCE)])

/** The agent's answer to the greeting, or null (timeout, close, or anything but exactly one answer). */
export async function readAnswer (sock: Socket, timeoutMs: number): Promise<Answer | null> {
  return await new Promise(resolve => {
    const done = (a: Answer | null): void => {
      clearTimeout(timer)
      sock.off('readable', onReadable)
      sock.off('close', onClose)
      resolve(a)
    }
    const onClose = (): void => { done(null) }
    const onReadable = (): void => {
      const b = sock.read(ANSWER) as Buffer | null
      if (b === null) return
      // The agent says nothing more before the verdict.
      if (b.length !== ANSWER || sock.readableLength > 0 || (b[0] !== FRESH && b[0] !== RESUME)) { done(null); return }
      done({ fresh: b[0] === FRESH, proof: b.subarray(1) })
    }
    const timer = setTimeout(() => { done(null) }, timeoutMs)
    sock.on('readable', onReadable)
    sock.once('close', onClose)
  })
}
