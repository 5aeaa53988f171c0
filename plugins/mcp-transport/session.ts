import { randomUUID } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'
import { DEFAULT_PROTOCOL_VERSION } from './schemas.js'

/** The protocol revision from which clients must accept SSE priming events (empty `data`). */
const PRIMING_SINCE = '2025-11-25'
const TAGGED = /\.(\d{4}-\d\d-\d\d)$/
/**
 * A client that declared `elicitation.url` at initialize gets `.url` in its session id, so that its later
 * tool calls (each a new request of a stateless server) can ask it for URL-mode elicitation
 * (docs/contract.md#url-elicitation). A client that sets the flag itself only declares its own capability.
 */
const URL_FLAG = '.url'
/**
 * Likewise `.ui` for a client that declared the MCP Apps extension (`io.modelcontextprotocol/ui`) at
 * initialize: its later tools/list and tools/call see the view references and the view-only tool
 * (docs/features.md#views-in-the-chat-mcp-apps). A client that sets the flag itself only declares its own capability.
 */
const APPS_FLAG = '.ui'
/** The MCP Apps extension identifier (SEP-1865). */
export const APPS_EXTENSION = 'io.modelcontextprotocol/ui'

/**
 * The Mcp-Session-Id handed out by initialize (docs/contract.md#transport): random and stored nowhere.
 * It ends with the protocol version negotiated there, so later requests of that client can be
 * framed for it without server state. Nothing ever requires or checks it.
 */
export function issueSessionId (negotiatedVersion: string, urlElicitation = false, apps = false): string {
  return `${randomUUID()}${urlElicitation ? URL_FLAG : ''}${apps ? APPS_FLAG : ''}.${negotiatedVersion}`
}

/** Whether the session id says its client declared `elicitation.url` (see URL_FLAG). */
export function elicitsUrl (headers: IncomingHttpHeaders): boolean {
  const session = headers['mcp-session-id']
  return typeof session === 'string' && session.length <= 128 && /^[0-9a-f-]{36}\.url\./.test(session)
}

/** Whether the session id says its client declared the MCP Apps extension (see APPS_FLAG). */
export function declaredApps (headers: IncomingHttpHeaders): boolean {
  const session = headers['mcp-session-id']
  return typeof session === 'string' && session.length <= 128 && /^[0-9a-f-]{36}(?:\.url)?\.ui\./.test(session)
}

/** The extension ids among `known` that a capabilities object declares (`extensions: { id: {…} }`). */
export function declaredExtensions (capabilities: unknown, known: ReadonlySet<string>): Set<string> {
  const extensions = capabilities !== null && typeof capabilities === 'object' ? (capabilities as { extensions?: unknown }).extensions : undefined
  const found = new Set<string>()
  if (extensions === null || typeof extensions !== 'object') return found
  for (const id of known) {
    const settings = (extensions as Record<string, unknown>)[id]
    if (Object.hasOwn(extensions, id) && settings !== null && typeof settings === 'object') found.add(id)
  }
  return found
}

/** Whether an initialize request's client capabilities include URL-mode elicitation (2025-11-25). */
export function declaresUrlElicitation (params: unknown): boolean {
  const elicitation = (params as { capabilities?: { elicitation?: unknown } } | undefined)?.capabilities?.elicitation
  const url = elicitation !== null && typeof elicitation === 'object' ? (elicitation as { url?: unknown }).url : undefined
  return url !== null && typeof url === 'object'
}

/**
 * Whether a POST stream may open with a priming event. Clients before protocol 2025-11-25 (e.g. TS
 * SDK <= 1.23) parse its empty data as JSON and report an error on every streamed call, so only a
 * client that speaks 2025-11-25 gets one: by its MCP-Protocol-Version header (missing = 2025-03-26),
 * or by the version it negotiated at initialize, which its session id carries.
 */
export function acceptsPriming (headers: IncomingHttpHeaders): boolean {
  const header = headers['mcp-protocol-version']
  const spoken = typeof header === 'string' && header.trim() !== '' ? header.trim() : DEFAULT_PROTOCOL_VERSION
  const session = headers['mcp-session-id']
  const negotiated = typeof session === 'string' ? TAGGED.exec(session)?.[1] : undefined
  return spoken >= PRIMING_SINCE || (negotiated !== undefined && negotiated >= PRIMING_SINCE)
}
