import Type, { type Static } from 'typebox'

export const McpTransportOptions = Type.Object({
  path: Type.Optional(Type.String({ default: '/mcp' })),
  singleUserMode: Type.Optional(Type.Union([Type.Literal('lenient'), Type.Literal('true'), Type.Literal('false')], { default: 'lenient' })),
  publicBaseUrl: Type.String({ description: 'its origin (and its loopback spellings) is always an allowed Origin' }),
  publicBaseUrlSet: Type.Optional(Type.Boolean({ default: true, description: 'false while PUBLIC_BASE_URL is unset: http loopback origins on the listening port are then allowed' })),
  allowedOrigins: Type.Optional(Type.Array(Type.String(), { default: [], description: 'extra origins: allowed and sent CORS headers' })),
  maxBodyBytes: Type.Optional(Type.Integer({ default: 16777216, minimum: 1024 })),
  keepAliveMs: Type.Optional(Type.Integer({ default: 15000, minimum: 100, description: 'SSE keep-alive comment interval' })),
  sseRetryMs: Type.Optional(Type.Integer({ default: 2000, minimum: 0, description: 'the SSE retry field: how long a client waits before it reconnects a stream' })),
  maxCallsPerChat: Type.Optional(Type.Integer({ default: 8, minimum: 1 })),
  maxListenStreamsPerChat: Type.Optional(Type.Integer({ default: 16, minimum: 1, description: 'open 2026-07-28 subscriptions/listen streams per chat; more are refused, so one chat cannot use up the server-wide limit' })),
  getStreamMaxMs: Type.Optional(Type.Integer({ default: 1800000, minimum: 1000, description: 'a GET stream is closed after this long' })),
  lenientWarnIntervalMs: Type.Optional(Type.Integer({ default: 60000, minimum: 0 })),
  shutdownDrainMs: Type.Optional(Type.Integer({ default: 6000, minimum: 0, description: 'on shutdown, running tool calls get this long to finish before they are cancelled' })),
  shutdownCancelWaitMs: Type.Optional(Type.Integer({ default: 3000, minimum: 0, description: 'after cancelling, how long a tool may take to stop before its call is answered anyway' })),
  requestStateKey: Type.Optional(Type.String({ default: '', description: 'secret the 2026-07-28 requestState HMAC key is derived from; empty = a random key per process' })),
  serverIcons: Type.Optional(Type.Array(Type.Object({
    src: Type.String({ minLength: 1 }),
    mimeType: Type.Optional(Type.String()),
    sizes: Type.Optional(Type.Array(Type.String())),
    theme: Type.Optional(Type.Union([Type.Literal('light'), Type.Literal('dark')]))
  }), { default: [], description: 'serverInfo.icons of initialize (docs/contract.md#icons); empty: none' }))
})
export type McpTransportOptions = Static<typeof McpTransportOptions>

/** The 2025-era revisions, negotiated by initialize (the first is the fallback offer); the legacy leg accepts these headers. */
export const SUPPORTED_PROTOCOL_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05']
/** The 2026-07-28 era: no initialize, server/discover, a `_meta` envelope on every request (served by the SDK's handler). */
export const MODERN_PROTOCOL_VERSIONS = ['2026-07-28']
/** Every revision the SDK server instances are built for (docs/contract.md#protocol-revisions). */
export const SERVED_PROTOCOL_VERSIONS = [...SUPPORTED_PROTOCOL_VERSIONS, ...MODERN_PROTOCOL_VERSIONS]
export const DEFAULT_PROTOCOL_VERSION = '2025-03-26'

/** POST /mcp: one JSON-RPC 2.0 request or notification; batches are refused (-32600). */
export const RpcBody = Type.Object({
  jsonrpc: Type.Literal('2.0'),
  id: Type.Optional(Type.Union([Type.String(), Type.Integer()], { description: 'absent for a notification' })),
  method: Type.String({ description: 'e.g. initialize, tools/list, tools/call' }),
  params: Type.Optional(Type.Object({}, { additionalProperties: true }))
}, { additionalProperties: true })

/** The headers of docs/contract.md#request-headers and docs/contract.md#generic-mcp-client (X-OpenWebUI-* aliases accepted); auth is Authorization: Bearer. */
export const McpHeaders = Type.Object({
  'x-chat-id': Type.Optional(Type.String({ description: 'the chat whose sandbox the tools use (alias X-OpenWebUI-Chat-Id); required unless SINGLE_USER_MODE' })),
  'x-user-email': Type.Optional(Type.String({ description: 'the user (alias X-OpenWebUI-User-Email)' })),
  'x-user-name': Type.Optional(Type.String({ description: 'percent-encoded display name (alias X-OpenWebUI-User-Name)' })),
  'x-mcp-servers': Type.Optional(Type.String({ description: 'comma-separated MCP server names for sub-agents' })),
  accept: Type.Optional(Type.String({ description: 'application/json, text/event-stream' }))
})
