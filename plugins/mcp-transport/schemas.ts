import Type, { type Static } from 'typebox'

export const McpTransportOptions = Type.Object({
  path: Type.Optional(Type.String({ default: '/mcp' })),
  apiKeyRequired: Type.Optional(Type.Boolean({ default: false, description: 'protected mode: every /mcp request needs the bearer key' })),
  singleUserMode: Type.Optional(Type.Union([Type.Literal('lenient'), Type.Literal('true'), Type.Literal('false')], { default: 'lenient' })),
  publicBaseUrl: Type.String({ description: 'its origin (and its loopback spellings) is always an allowed Origin' }),
  publicBaseUrlSet: Type.Optional(Type.Boolean({ default: true, description: 'false while PUBLIC_BASE_URL is unset: http loopback origins on the listening port are then allowed' })),
  allowedOrigins: Type.Optional(Type.Array(Type.String(), { default: [], description: 'extra origins: allowed and sent CORS headers' })),
  maxBodyBytes: Type.Optional(Type.Integer({ default: 16777216, minimum: 1024 })),
  keepAliveMs: Type.Optional(Type.Integer({ default: 15000, minimum: 100, description: 'SSE keep-alive comment interval' })),
  sseRetryMs: Type.Optional(Type.Integer({ default: 2000, minimum: 0, description: 'the SSE retry field: how long a client waits before it reconnects a stream' })),
  maxCallsPerChat: Type.Optional(Type.Integer({ default: 8, minimum: 1 })),
  getStreamMaxMs: Type.Optional(Type.Integer({ default: 1800000, minimum: 1000, description: 'a GET stream is closed after this long' })),
  lenientWarnIntervalMs: Type.Optional(Type.Integer({ default: 60000, minimum: 0 })),
  shutdownDrainMs: Type.Optional(Type.Integer({ default: 6000, minimum: 0, description: 'on shutdown, running tool calls get this long to finish before they are cancelled' })),
  shutdownCancelWaitMs: Type.Optional(Type.Integer({ default: 3000, minimum: 0, description: 'after cancelling, how long a tool may take to stop before its call is answered anyway' }))
})
export type McpTransportOptions = Static<typeof McpTransportOptions>

export const SUPPORTED_PROTOCOL_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05']
export const DEFAULT_PROTOCOL_VERSION = '2025-03-26'
