import { randomUUID } from 'node:crypto'
import type { JSONRPCMessage } from '@modelcontextprotocol/server'
import { ProtocolErrorCode } from '@modelcontextprotocol/server'
import { protocolError } from './errors.js'

/*
 * Requests from the server to a 2025-era client during a tool call (docs/contract.md#url-elicitation): the
 * request goes out on the call's own SSE stream; the client answers with a separate POST of a JSON-RPC
 * response, which the stateless transport hands here by id. Ids are random (never the SDK's per-instance
 * counters, which repeat across requests), a response counts only for the chat that was asked, and
 * everything is bounded: a few requests per chat, a total, a timeout, and the call's own abort.
 */
export interface ClientRequests {
  /**
   * Writes `method` to the client with `write` and resolves with its result. Rejects with a protocol
   * error when the client answers with an error, after `timeoutMs`, when `signal` aborts, or when the
   * chat already has its maximum of open requests.
   */
  ask (chatId: string, write: (message: JSONRPCMessage) => void, method: string, params: Record<string, unknown>,
    opts: { timeoutMs: number, signal: AbortSignal }): Promise<Record<string, unknown>>
  /** A JSON-RPC response POSTed for `chatId`; true when it answered one of our open requests (and settled it). */
  answer (chatId: string, message: Record<string, unknown>): boolean
  /** How many requests are waiting (tests, diagnostics). */
  size (): number
  /** Rejects every open request (shutdown). */
  close (): void
}

interface Pending { chatId: string, settle: (outcome: { result?: Record<string, unknown>, error?: Error }) => void }

export function createClientRequests (opts: { maxPerChat: number, maxTotal: number }): ClientRequests {
  const pending = new Map<string, Pending>()
  const openFor = (chatId: string): number => [...pending.values()].filter(p => p.chatId === chatId).length

  return {
    async ask (chatId, write, method, params, { timeoutMs, signal }) {
      if (signal.aborted) throw protocolError(ProtocolErrorCode.InternalError, 'the call was cancelled')
      if (pending.size >= opts.maxTotal || openFor(chatId) >= opts.maxPerChat) {
        throw protocolError(ProtocolErrorCode.InternalError, 'too many requests to the client are waiting')
      }
      const id = `cubicle-${randomUUID()}`
      return await new Promise<Record<string, unknown>>((resolve, reject) => {
        const done = (outcome: { result?: Record<string, unknown>, error?: Error }): void => {
          if (!pending.delete(id)) return
          clearTimeout(timer)
          signal.removeEventListener('abort', onAbort)
          if (outcome.result !== undefined) resolve(outcome.result)
          else reject(outcome.error ?? protocolError(ProtocolErrorCode.InternalError, 'no answer'))
        }
        const onAbort = (): void => { done({ error: protocolError(ProtocolErrorCode.InternalError, 'the call was cancelled') }) }
        const timer = setTimeout(() => { done({ error: protocolError(ProtocolErrorCode.InternalError, `the client did not answer ${method} within ${Math.round(timeoutMs / 1000)} s`) }) }, timeoutMs)
        timer.unref()
        signal.addEventListener('abort', onAbort, { once: true })
        pending.set(id, { chatId, settle: done })
        write({ jsonrpc: '2.0', id, method, params })
      })
    },

    answer (chatId, message) {
      const id = message.id
      if (typeof id !== 'string') return false
      const open = pending.get(id)
      if (open === undefined || open.chatId !== chatId) return false
      const { result, error } = message as { result?: unknown, error?: { code?: unknown, message?: unknown } }
      if (result !== null && typeof result === 'object' && !Array.isArray(result)) {
        open.settle({ result: result as Record<string, unknown> })
      } else {
        const code = typeof error?.code === 'number' ? error.code : ProtocolErrorCode.InternalError
        const text = typeof error?.message === 'string' ? error.message.slice(0, 500) : 'the client answered with an error'
        open.settle({ error: protocolError(code, text) })
      }
      return true
    },

    size: () => pending.size,

    close () {
      for (const open of [...pending.values()]) open.settle({ error: protocolError(ProtocolErrorCode.InternalError, 'the server is shutting down') })
    }
  }
}
