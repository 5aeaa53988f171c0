import Type, { type Static } from 'typebox'
import { PROXY_DEFAULTS } from './proxy.js'

/** 20 MiB/s per chat, both directions: enough for package installs, keeps one chat from taking the uplink. */
export const DEFAULT_BYTES_PER_SECOND = 20 * 1024 * 1024

const Mode = Type.Union([Type.Literal('open'), Type.Literal('allowlist'), Type.Literal('off')])

export const EgressOptions = Type.Object({
  mode: Type.Optional(Type.Union([Type.Literal('open'), Type.Literal('allowlist'), Type.Literal('off')], { default: 'open', description: 'EGRESS' })),
  allow: Type.Optional(Type.String({ default: '', description: 'EGRESS_ALLOW: names (*.x, .x), IPs, CIDRs, each with optional :port' })),
  port: Type.Optional(Type.Integer({ default: 3128, minimum: 1, maximum: 65535, description: 'EGRESS_PORT: proxy port on the sandbox network gateway' })),
  maxConnectionsPerChat: Type.Optional(Type.Integer({ default: 64, minimum: 1, description: 'EGRESS_MAX_CONNECTIONS' })),
  maxConnections: Type.Optional(Type.Integer({ default: 2048, minimum: 1, description: 'open proxy connections over all chats' })),
  reservedConnections: Type.Optional(Type.Integer({ minimum: 0, description: 'the last of maxConnections, kept for chats holding fewer than reservedBelow; unset = an eighth (256 of 2048)' })),
  reservedBelow: Type.Optional(Type.Integer({ default: PROXY_DEFAULTS.reservedBelow, minimum: 1, description: 'a chat holding fewer connections than this may use the reserved ones' })),
  maxBytesPerSecond: Type.Optional(Type.Integer({ default: DEFAULT_BYTES_PER_SECOND, minimum: 0, description: 'EGRESS_MAX_BYTES_PER_SECOND: per chat, 0 = unlimited' })),
  dnsServers: Type.Optional(Type.String({ default: '', description: 'EGRESS_DNS_SERVERS: the proxy\'s DNS servers (ip or ip:port, comma or space separated); empty = those of /etc/resolv.conf' })),
  dnsTimeoutMs: Type.Optional(Type.Integer({ default: 5000, minimum: 100, maximum: 60000, description: 'one name lookup, both families and every try' })),
  maxLookupsPerChat: Type.Optional(Type.Integer({ default: PROXY_DEFAULTS.maxLookupsPerChat, minimum: 1, description: 'name lookups in flight per chat' })),
  maxLookups: Type.Optional(Type.Integer({ default: PROXY_DEFAULTS.maxLookups, minimum: 1, description: 'name lookups in flight over all chats' })),
  hostsFile: Type.Optional(Type.String({ default: '/etc/hosts', description: 'names the proxy answers without DNS; empty = none' })),
  procDir: Type.Optional(Type.String({ default: '/proc', description: 'where the routing table is read (the host address class)' })),
  idleTimeoutS: Type.Optional(Type.Integer({ default: 300, minimum: 1, description: 'EGRESS_IDLE_TIMEOUT' })),
  logSize: Type.Optional(Type.Integer({ default: 200, minimum: 1, maximum: 10000, description: 'connections kept per chat' })),
  logChats: Type.Optional(Type.Integer({ default: 1000, minimum: 1, description: 'chats whose connection log is kept' })),
  firewall: Type.Optional(Type.Boolean({ default: true, description: 'EGRESS_FIREWALL: install the iptables rules' })),
  users: Type.Optional(Type.String({ default: '', description: 'EGRESS_USERS: path of the per-user defaults file (JSON); empty = none' }))
})
export type EgressOptions = Static<typeof EgressOptions>

export const ChatParams = Type.Object({ chat: Type.String({ maxLength: 200, description: 'the chat id (docs/contract.md#chat-id-validation)' }) })
export type ChatParams = Static<typeof ChatParams>

export const OverrideBody = Type.Object({
  mode: Type.Optional(Type.Union([Mode, Type.Null()])),
  allow: Type.Optional(Type.Array(Type.String({ maxLength: 300 }), { maxItems: 256 }))
}, { additionalProperties: false })
export type OverrideBody = Static<typeof OverrideBody>

const Record_ = Type.Object({
  time: Type.String(),
  host: Type.String(),
  port: Type.Integer(),
  method: Type.String(),
  address: Type.Optional(Type.String()),
  decision: Type.String(),
  reason: Type.String(),
  rule: Type.Optional(Type.String()),
  message: Type.Optional(Type.String()),
  bytesUp: Type.Integer(),
  bytesDown: Type.Integer(),
  durationMs: Type.Integer()
})

export const PolicyReply = Type.Object({
  mode: Mode,
  source: Type.Union([Type.Literal('chat'), Type.Literal('user'), Type.Literal('server')]),
  allow: Type.Array(Type.String()),
  override: Type.Union([Type.Object({ mode: Type.Union([Mode, Type.Null()]), allow: Type.Array(Type.String()) }), Type.Null()]),
  user: Type.Union([Type.Object({ email: Type.String(), mode: Type.Union([Mode, Type.Null()]), allow: Type.Array(Type.String()) }), Type.Null()])
})

export const LogReply = Type.Object({ connections: Type.Array(Record_) })
