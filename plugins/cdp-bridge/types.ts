import type { WebSocket } from 'ws'

/** A page target as /browser/{chat}/status reports it. */
export interface BrowserPage { id: string, title: string, url: string }

export interface BrowserStatus {
  /** true when the sandbox runs and its browser answered */
  active: boolean
  /** targets of type `page`, in the browser's order (most recently active first) */
  pages: BrowserPage[]
}

/** One CDP target, reduced to known fields with bounded sizes; internal addresses removed. */
export interface CdpTarget {
  id: string
  type: string
  title: string
  url: string
  description?: string
  faviconUrl?: string
  parentId?: string
  attached?: boolean
  /** set by the route: the public relay URL of this target */
  webSocketDebuggerUrl?: string
}

/** `GET /json/version` without webSocketDebuggerUrl. */
export type CdpVersion = Record<string, string>

/**
 * The CDP bridge of one server (docs/contract.md#browser). Reaches each chat's browser at 127.0.0.1:<CDP_PORT>
 * inside its sandbox through an exec relay; never creates, starts or reconfigures a sandbox. Answers
 * from the sandbox are untrusted: bounded in size and time, parsed defensively, reduced to known fields.
 */
export interface CdpService {
  /** `{active:false,pages:[]}` when the sandbox is not running or the browser does not answer; never rejects. */
  status (chatId: string): Promise<BrowserStatus>
  /** The target list. Rejects CDP_SANDBOX_NOT_RUNNING (404) or CDP_BROWSER_UNAVAILABLE (503, 3 s timeout). */
  targets (chatId: string): Promise<CdpTarget[]>
  /** The version object. Same errors as targets(). */
  version (chatId: string): Promise<CdpVersion>
  /**
   * Relays an accepted client socket to the target `targetId` until either side closes; holds a socket
   * lease on the sandbox meanwhile. The caller has checked auth, origin, the id and reserve().
   */
  relay (chatId: string, targetId: string, client: WebSocket, release: () => void): void
  /**
   * Reserves one viewer slot of the chat (per-chat and global caps). Rejects CDP_TOO_MANY_VIEWERS (429)
   * or CDP_SANDBOX_NOT_RUNNING (404). Returns the function that frees the slot (idempotent).
   */
  reserve (chatId: string): Promise<() => void>
  /** Open relayed sockets of a chat. */
  viewers (chatId: string): number
}

declare module 'fastify' {
  interface FastifyInstance { cdp: CdpService }
}
