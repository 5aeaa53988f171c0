import Type, { type Static } from 'typebox'

export const CdpBridgeOptions = Type.Object({
  cdpPort: Type.Optional(Type.Integer({ default: 9222, minimum: 1, maximum: 65535, description: 'CDP_PORT: loopback port of the browser inside the sandbox' })),
  publicBaseUrl: Type.Optional(Type.String({ default: 'http://computer-use-server:8081', description: 'PUBLIC_BASE_URL: host (and path) of rewritten webSocketDebuggerUrl values' })),
  timeoutMs: Type.Optional(Type.Integer({ default: 3000, minimum: 100, description: 'How long /json and /json/version wait for the browser (docs/contract.md#browser: 3 s)' })),
  maxAnswerBytes: Type.Optional(Type.Integer({ default: 1048576, minimum: 1024, description: 'Largest /json answer read from a sandbox' })),
  maxTargets: Type.Optional(Type.Integer({ default: 100, minimum: 1, description: 'Targets kept from one /json answer' })),
  maxViewersPerChat: Type.Optional(Type.Integer({ default: 8, minimum: 1, description: 'Open browser sockets per chat' })),
  maxViewers: Type.Optional(Type.Integer({ default: 256, minimum: 1, description: 'Open browser sockets per server' })),
  maxMessageBytes: Type.Optional(Type.Integer({ default: 33554432, minimum: 1024, description: 'Largest relayed message (docs/contract.md#browser: 32 MiB)' })),
  highWaterBytes: Type.Optional(Type.Integer({ default: 4194304, minimum: 1024, description: 'Bytes queued towards one side before the other side is paused' })),
  connectTimeoutMs: Type.Optional(Type.Integer({ default: 5000, minimum: 100, description: 'Handshake timeout of the relay to the browser' })),
  handoffAskTimeoutMs: Type.Optional(Type.Integer({ default: 300000, minimum: 100, description: 'browser handoff: how long the human has to answer the URL elicitation (docs/contract.md#browser-handoff)' })),
  handoffWaitTimeoutMs: Type.Optional(Type.Integer({ default: 900000, minimum: 100, description: 'browser handoff: how long the call waits for the browser to be handed back' })),
  handoffShownMs: Type.Optional(Type.Integer({ default: 1800000, minimum: 100, description: 'browser handoff: how long a handoff given as a link stays shown in the Browser view' })),
  handoffProgressMs: Type.Optional(Type.Integer({ default: 15000, minimum: 10, description: 'browser handoff: progress interval while the call waits' }))
})
export type CdpBridgeOptions = Static<typeof CdpBridgeOptions>

export const ChatParams = Type.Object({ chat: Type.String({ maxLength: 512, description: 'the chat id (docs/contract.md#chat-id-validation)' }) })
export const SocketParams = Type.Object({
  chat: Type.String({ maxLength: 512, description: 'the chat id (docs/contract.md#chat-id-validation)' }),
  id: Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}$', description: 'CDP target id' })
})
export type SocketParams = Static<typeof SocketParams>

const Page = Type.Object({ id: Type.String(), title: Type.String(), url: Type.String() })
export const StatusReply = Type.Object({
  active: Type.Boolean(),
  pages: Type.Array(Page),
  handoff: Type.Optional(Type.Object({ why: Type.String(), since: Type.String() }, { description: 'the open `browser handoff` of the chat (docs/contract.md#browser-handoff)' }))
})
export const ReleaseReply = Type.Object({ released: Type.Boolean() })

export const TargetReply = Type.Object({
  id: Type.String(),
  type: Type.String(),
  title: Type.String(),
  url: Type.String(),
  description: Type.Optional(Type.String()),
  faviconUrl: Type.Optional(Type.String()),
  parentId: Type.Optional(Type.String()),
  attached: Type.Optional(Type.Boolean()),
  webSocketDebuggerUrl: Type.Optional(Type.String())
}, { additionalProperties: false })
export const TargetsReply = Type.Array(TargetReply)
export const VersionReply = Type.Record(Type.String(), Type.String())
