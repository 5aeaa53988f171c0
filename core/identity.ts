import { createHash } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'
import { normalizeChatId } from './chat-id.js'
import type { ChatScope } from './auth.js'
import type { SingleUserMode } from './config.js'

/**
 * A user a plugin-verified bearer token names (an OAuth access token on /mcp, docs/contract.md#oauth). The plugin that
 * verifies the token returns it (core/auth.ts BearerVerifier); readUser and resolveMcpChat read it
 * from the request's principal.
 */
export interface TokenUser {
  /** The token's subject: the user, stable across sign-ins (an email where the sign-in gave one). */
  subject: string
  /** The user's email (the rules of docs/contract.md#request-headers); it replaces any X-User-Email header of the request. */
  email?: string
  /** Display name for git author/committer; a header name is used when absent. */
  name?: string
}

/**
 * What a request's credential proved, as core's route kit records it in `request.principal`
 * (core/route-kit.ts): MCP_API_KEY (the operator's own clients), a user named by a plugin-verified
 * bearer token, or a capability token of the request's chat (`request.chat`) with its scope. A
 * request that presented nothing, in open mode or on a route open to anonymous callers, has none
 * (`null`).
 */
export type Principal =
  | { kind: 'key' }
  | ({ kind: 'user' } & TokenUser)
  | { kind: 'link', scope: ChatScope, token: string }

/** How a request proved who it is: the API key, or a plugin-verified token (OAuth). */
export type Caller = 'key' | 'oauth'

/** The caller a principal stands for; a capability token names a chat, not a caller. */
export function callerOf (principal: Principal | null): Caller | undefined {
  if (principal?.kind === 'key') return 'key'
  return principal?.kind === 'user' ? 'oauth' : undefined
}

/**
 * The chat of an OAuth user who sends no X-Chat-Id (docs/contract.md#where-the-chat-id-comes-from): `user:` and 20 hex
 * characters of SHA-256 over the subject. Stable across sign-ins, restarts and clients, so one
 * person keeps one computer, and two people never share one (the subject is unique per user).
 */
export function userChatId (subject: string): string {
  return `user:${createHash('sha256').update(`cubicle-user\0${subject}`, 'utf8').digest('hex').slice(0, 20)}`
}

/** Header value by direct name, then alias (docs/contract.md#request-headers): trimmed, empty counts as absent. */
export function headerValue (headers: IncomingHttpHeaders, name: string, alias?: string): string | undefined {
  for (const key of alias === undefined ? [name] : [name, alias]) {
    const raw = headers[key.toLowerCase()]
    const value = (Array.isArray(raw) ? raw[0] : raw)?.trim()
    if (value !== undefined && value !== '') return value
  }
  return undefined
}

const EMAIL_BAD = /[\s<>"'\\]/
/** Validates a user email per docs/contract.md#request-headers; invalid values count as absent. */
export function validEmail (raw: string | undefined): string | undefined {
  if (raw === undefined || raw.length > 254 || EMAIL_BAD.test(raw)) return undefined
  return raw.split('@').length === 2 && !raw.startsWith('@') && !raw.endsWith('@') ? raw : undefined
}

/** Percent-decodes once as UTF-8 (keeping the raw text when it is not valid encoding), strips controls, cuts to 128. */
export function cleanUserName (raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined
  let text = raw
  try { text = decodeURIComponent(raw) } catch {}
  // eslint-disable-next-line no-control-regex
  text = Array.from(text.replace(/[\u0000-\u001f\u007f-\u009f]/g, '')).slice(0, 128).join('').trim()
  return text === '' ? undefined : text
}

const MCP_SERVER = /^[a-z0-9][a-z0-9_-]{0,63}$/
const GITLAB_HOST = /^[a-z0-9.-]{1,253}(:[0-9]{1,5})?$/

/** Secrets and per-user settings a client may send with a request. Never logged or persisted. */
export interface RequestCredentials {
  gitlabToken?: string
  gitlabHost?: string
  anthropicApiKey?: string
  anthropicBaseUrl?: string
  mcpTokensUrl?: string
  mcpTokensApiKey?: string
  /**
   * How the request that sent the settings-service pair was authenticated; absent = not at all. The
   * pair is only a request: user-skills uses it for an authenticated caller and an allowlisted
   * origin only (docs/settings.md: MCP_TOKENS_URL_ALLOW), else the server's own settings.
   */
  mcpTokensCaller?: Caller
}

export interface RequestUser {
  email?: string
  /** True when an email header was present but rejected (the caller logs it at warn). */
  emailRejected: boolean
  name?: string
  mcpServers: string[]
  credentials: RequestCredentials
}

function httpUrl (raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined
  try {
    const url = new URL(raw)
    return url.protocol === 'http:' || url.protocol === 'https:' ? raw : undefined
  } catch { return undefined }
}

/**
 * Reads the user-related headers of docs/contract.md#request-headers, each with its X-OpenWebUI-* alias. For a request
 * authenticated by an OAuth token (`principal`, the request's `request.principal`) the token's
 * identity wins: its email replaces X-User-Email (a header must not let one user act as another)
 * and its name, when known, replaces X-User-Name.
 */
export function readUser (headers: IncomingHttpHeaders, principal: Principal | null = null): RequestUser {
  const user = principal?.kind === 'user' ? principal : undefined
  const rawEmail = user === undefined ? headerValue(headers, 'x-user-email', 'x-openwebui-user-email') : user.email
  const email = validEmail(rawEmail)
  const host = headerValue(headers, 'x-gitlab-host', 'x-openwebui-gitlab-host')?.toLowerCase()
  const anthropicApiKey = headerValue(headers, 'x-anthropic-api-key', 'x-openwebui-anthropic-api-key')
  const mcpTokensApiKey = headerValue(headers, 'x-mcp-tokens-api-key', 'x-openwebui-mcp-tokens-api-key')
  const credentials: RequestCredentials = {}
  const set = <K extends keyof RequestCredentials>(key: K, value: RequestCredentials[K] | undefined): void => {
    if (value !== undefined) credentials[key] = value
  }
  set('gitlabToken', headerValue(headers, 'x-gitlab-token', 'x-openwebui-gitlab-token'))
  set('gitlabHost', host !== undefined && GITLAB_HOST.test(host) ? host : undefined)
  set('anthropicApiKey', anthropicApiKey)
  // A client-chosen URL is honoured only with a client-supplied credential: a server-held secret
  // is never sent to an address the client picked (docs/contract.md#request-headers).
  if (anthropicApiKey !== undefined) set('anthropicBaseUrl', httpUrl(headerValue(headers, 'x-anthropic-base-url', 'x-openwebui-anthropic-base-url')))
  set('mcpTokensApiKey', mcpTokensApiKey)
  if (mcpTokensApiKey !== undefined) {
    set('mcpTokensUrl', httpUrl(headerValue(headers, 'x-mcp-tokens-url', 'x-openwebui-mcp-tokens-url')))
    set('mcpTokensCaller', callerOf(principal))
  }
  const servers = headerValue(headers, 'x-mcp-servers', 'x-openwebui-mcp-servers') ?? ''
  return {
    email,
    emailRejected: rawEmail !== undefined && email === undefined,
    name: cleanUserName(user?.name ?? headerValue(headers, 'x-user-name', 'x-openwebui-user-name')),
    mcpServers: [...new Set(servers.split(',').map(s => s.trim().toLowerCase()).filter(s => MCP_SERVER.test(s)))],
    credentials
  }
}

/**
 * What a client must do to name its chat, for the texts a request without one gets (the result note,
 * the strict-mode error, the server's warning). Open WebUI's native MCP connection sends
 * X-OpenWebUI-Chat-Id only when Open WebUI itself runs with this switch (docs/clients.md#open-webui).
 */
export const OPEN_WEBUI_CHAT_ID_SWITCH = 'ENABLE_FORWARD_USER_INFO_HEADERS=true'
export const CHAT_ID_HINT = 'send X-Chat-Id (or X-OpenWebUI-Chat-Id) with an id that names the chat; ' +
  `with Open WebUI's native MCP connection, start Open WebUI with ${OPEN_WEBUI_CHAT_ID_SWITCH} so that it sends X-OpenWebUI-Chat-Id`

/** How a request's chat was decided on /mcp (docs/contract.md#where-the-chat-id-comes-from, docs/contract.md#single-user-mode). */
export type ChatResolution =
  | { kind: 'chat', chatId: string, /** lenient mode without header: results get the note */ lenientNote: boolean }
  | { kind: 'invalid', reason: string }
  | { kind: 'missing' } // strict mode, no header

/**
 * Resolves the chat of an /mcp request from X-Chat-Id / X-OpenWebUI-Chat-Id under SINGLE_USER_MODE.
 * An OAuth-authenticated request (its principal is a token's user) stays among its user's own chats: without
 * a header it gets the user's chat (userChatId), and a header names a chat below it,
 * `user:<hex>:<header id>`, so no header can reach another person's sandbox. SINGLE_USER_MODE=true
 * still means one computer, `default`, for everybody (docs/contract.md#single-user-mode: prompts always render for `default`).
 */
export function resolveMcpChat (headers: IncomingHttpHeaders, mode: SingleUserMode, principal: Principal | null = null): ChatResolution {
  if (mode === 'true') return { kind: 'chat', chatId: 'default', lenientNote: false }
  const raw = headerValue(headers, 'x-chat-id', 'x-openwebui-chat-id')
  if (principal?.kind === 'user') return resolveUserChat(userChatId(principal.subject), raw)
  if (raw === undefined) {
    return mode === 'false' ? { kind: 'missing' } : { kind: 'chat', chatId: 'default', lenientNote: true }
  }
  const chatId = normalizeChatId(raw)
  return chatId === null ? { kind: 'invalid', reason: 'must match ^[a-z0-9][a-z0-9_:-]{0,63}$ after lowercasing' } : { kind: 'chat', chatId, lenientNote: false }
}

function resolveUserChat (home: string, raw: string | undefined): ChatResolution {
  if (raw === undefined) return { kind: 'chat', chatId: home, lenientNote: false }
  const chatId = normalizeChatId(`${home}:${raw}`)
  // The header must be a valid id on its own (docs/contract.md#chat-id-validation), and `home:` takes 26 of the 64 characters.
  if (chatId === null || normalizeChatId(raw) === null) {
    return { kind: 'invalid', reason: `must match ^[a-z0-9][a-z0-9_:-]{0,${63 - home.length - 1}}$ after lowercasing (OAuth users' chat ids are kept below their own)` }
  }
  return { kind: 'chat', chatId, lenientNote: false }
}
