import Type, { type Static } from 'typebox'

/** Options of the ports plugin, fed from AppConfig by fastify.config.ts; the ones after `idleTimeoutS` exist for tests and tuning. */
export const PortsOptions = Type.Object({
  publicBaseUrl: Type.Optional(Type.String({ default: 'http://computer-use-server:8081', description: 'PUBLIC_BASE_URL: origin, host and path prefix of app URLs' })),
  appsDomain: Type.Optional(Type.String({ default: '', description: 'APPS_DOMAIN: serve each app on its own origin <chat key>-<port>.<APPS_DOMAIN> (wildcard DNS); empty: under PUBLIC_BASE_URL/apps/' })),
  maxConnectionsPerChat: Type.Optional(Type.Integer({ default: 32, minimum: 1, maximum: 10000, description: 'APPS_MAX_CONNECTIONS: open connections to one chat\'s apps' })),
  maxRequestBytes: Type.Optional(Type.Integer({ default: 67108864, minimum: 1024, description: 'APPS_MAX_REQUEST_BYTES: largest request body relayed to an app' })),
  maxResponseBytes: Type.Optional(Type.Integer({ default: 4294967296, minimum: 1024, description: 'APPS_MAX_RESPONSE_BYTES: largest answer relayed from an app (cut beyond)' })),
  headersTimeoutS: Type.Optional(Type.Integer({ default: 120, minimum: 1, description: 'APPS_TIMEOUT: wait for the head of an app\'s answer' })),
  idleTimeoutS: Type.Optional(Type.Integer({ default: 300, minimum: 1, description: 'APPS_IDLE_TIMEOUT: a relayed request or WebSocket with no byte either way for this long is closed' })),
  hiddenPorts: Type.Optional(Type.Array(Type.Integer({ minimum: 1, maximum: 65535 }), { default: [9222], description: 'ports never listed or served as apps (CDP_PORT: the browser\'s debugging port; EGRESS_PORT with SANDBOX_EGRESS_SOCKET: the agent\'s egress relay)' })),
  maxHeaderBytes: Type.Optional(Type.Integer({ default: 32768, minimum: 1024, description: 'largest head (status line and headers) accepted from an app' })),
  maxMessageBytes: Type.Optional(Type.Integer({ default: 16777216, minimum: 1024, description: 'largest WebSocket message relayed from an app' })),
  highWaterBytes: Type.Optional(Type.Integer({ default: 4194304, minimum: 1024, description: 'bytes queued towards one side of a WebSocket before the other is paused' })),
  freeSocketMs: Type.Optional(Type.Integer({ default: 4000, minimum: 100, description: 'unused keep-alive connections to an app close after this long' })),
  listTimeoutMs: Type.Optional(Type.Integer({ default: 5000, minimum: 100, description: 'limit of reading the listening ports of a sandbox' }))
})
export type PortsOptions = Static<typeof PortsOptions>

const chat = Type.String({ description: 'the chat id (docs/contract.md#chat-id-validation); 400 invalid_chat_id otherwise' })
const port = Type.String({ description: 'the port the app listens on inside the sandbox, 1024–65535; 400 invalid_port otherwise' })

export const AppParams = Type.Object({ chat, port })
export const AppPathParams = Type.Object({ chat, port, '*': Type.String({ description: 'the path the app gets, with the query (minus `t`)' }) })
export const AppQuery = Type.Object({
  t: Type.Optional(Type.String({ description: 'control token of this chat; a GET with it sets the app\'s cookie and is redirected without it' }))
}, { additionalProperties: true })
export const ChatParams = Type.Object({ chat })
export const AppBody = Type.Unknown({ description: 'any body, relayed to the app as it comes (at most APPS_MAX_REQUEST_BYTES, else 413)' })

export const AppsReply = Type.Object({
  apps: Type.Array(Type.Object({
    port: Type.Integer({ description: 'listening port inside the sandbox' }),
    url: Type.String({ description: 'the app URL (with the control token in protected mode)' })
  }))
})
