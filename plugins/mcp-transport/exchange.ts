import type { JSONRPCMessage, MessageExtraInfo, RequestId, Transport } from '@modelcontextprotocol/server'

/**
 * An SDK Transport for exactly one HTTP exchange of a 2025-era client (the 2026-07-28 era is served by
 * the SDK's own per-request transport, see modern.ts): one request goes in, messages related to it
 * come out (progress notifications, then the response).
 *
 * We implement the public Transport interface instead of using the SDK's StreamableHTTPServerTransport
 * because the wire contract (docs/contract.md#mcp-endpoint) needs things that transport does not do: JSON replies for
 * clients whose Accept lacks text/event-stream (it answers 406), keep-alive comments on tool-call
 * streams at our interval, dropping the response of a call cancelled from another HTTP request, and
 * no session bookkeeping at all.
 */
export class Exchange implements Transport {
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: <T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void
  /** Set when the call was cancelled: its response must not be sent. */
  dropResponse = false
  private readonly done: Promise<JSONRPCMessage | undefined>
  private finish!: (message: JSONRPCMessage | undefined) => void

  constructor (private readonly id: RequestId, private readonly onNotification: (message: JSONRPCMessage) => void) {
    this.done = new Promise(resolve => { this.finish = resolve })
  }

  async start (): Promise<void> {}

  async send (message: JSONRPCMessage): Promise<void> {
    const isResponse = 'id' in message && ('result' in message || 'error' in message)
    if (isResponse) {
      if (message.id === this.id) this.finish(this.dropResponse ? undefined : message)
      return
    }
    this.onNotification(message)
  }

  async close (): Promise<void> {
    this.finish(undefined)
    this.onclose?.()
  }

  /**
   * The client is gone: resolve `deliver` with no response now. The SDK sends nothing for a request
   * it cancelled, so without this the exchange (and its stream's timers) would wait forever.
   */
  abandon (): void {
    this.finish(undefined)
  }

  /** Hands the request to the connected server; resolves with its response (undefined when dropped). */
  async deliver (message: JSONRPCMessage, extra: MessageExtraInfo): Promise<JSONRPCMessage | undefined> {
    this.onmessage?.(message, extra)
    return await this.done
  }
}
