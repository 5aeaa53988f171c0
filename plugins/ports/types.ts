/** One app of a chat: a port listening in its sandbox, and the URL that opens it (docs/features.md#app-preview-urls). */
export interface ChatApp {
  port: number
  /** `<PUBLIC_BASE_URL>/apps/<chat>/<port>/`, without a token (control tokens are never handed to the model, docs/contract.md#capability-tokens) */
  url: string
}

/**
 * App preview URLs (docs/features.md#app-preview-urls): `/apps/<chat>/<port>/…` relays HTTP and
 * WebSocket requests to 127.0.0.1:<port> inside the chat's sandbox. Never creates or starts a sandbox.
 */
export interface PortsService {
  /** The chat's listening app ports with their URLs, by port; [] when its sandbox is not running. */
  apps (chatId: string): Promise<ChatApp[]>
  /** The URL of one port, without a token: in protected mode a browser opens it once it holds the app's cookie (set by a `?t=` visit, e.g. from the preview page's Apps view). */
  appUrl (chatId: string, port: number): string
  /** Open connections to the chat's apps (HTTP connections in use or pooled, WebSockets). */
  connections (chatId: string): number
}

declare module 'fastify' {
  interface FastifyInstance { ports: PortsService }
}
