import type { IncomingHttpHeaders } from 'node:http'
import { normalizeChatId } from './chat-id.js'
import type { SingleUserMode } from './config.js'

/** Header value by direct name, then alias (surface.md §1.1): trimmed, empty counts as absent. */
export function headerValue (headers: IncomingHttpHeaders, name: string, alias?: string): string | undefined {
  for (const key of alias === undefined ? [name] : [name, alias]) {
    const raw = headers[key.toLowerCase()]
    const value = (Array.isArray(raw) ? raw[0] : raw)?.trim()
    if (value !== undefined && value !== '') return value
  }
  return undefined
}

const EMAIL_BAD = /[\s<>"'\\]/
/** Validates a user email per §1.1; invalid values count as absent. */
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

/** Reads the user-related headers of §1.1, each with its X-OpenWebUI-* alias. */
export function readUser (headers: IncomingHttpHeaders): RequestUser {
  const rawEmail = headerValue(headers, 'x-user-email', 'x-openwebui-user-email')
  const email = validEmail(rawEmail)
  const host = headerValue(headers, 'x-gitlab-host', 'x-openwebui-gitlab-host')?.toLowerCase()
  const anthropicApiKey = headerValue(headers, 'x-anthropic-api-key', 'x-openwebui-anthropic-api-key')
  const mcpTokensApiKey = headerValue(headers, 'x-mcp-tokens-api-key', 'x-openwebui-mcp-tokens-api-key')
  const credentials: RequestCredentials = {}
  const set = <K extends keyof RequestCredentials>(key: K, value: string | undefined): void => {
    if (value !== undefined) credentials[key] = value
  }
  set('gitlabToken', headerValue(headers, 'x-gitlab-token', 'x-openwebui-gitlab-token'))
  set('gitlabHost', host !== undefined && GITLAB_HOST.test(host) ? host : undefined)
  set('anthropicApiKey', anthropicApiKey)
  // A client-chosen URL is honoured only with a client-supplied credential: a server-held secret
  // is never sent to an address the client picked (§1.1 deviation).
  if (anthropicApiKey !== undefined) set('anthropicBaseUrl', httpUrl(headerValue(headers, 'x-anthropic-base-url', 'x-openwebui-anthropic-base-url')))
  set('mcpTokensApiKey', mcpTokensApiKey)
  if (mcpTokensApiKey !== undefined) set('mcpTokensUrl', httpUrl(headerValue(headers, 'x-mcp-tokens-url', 'x-openwebui-mcp-tokens-url')))
  const servers = headerValue(headers, 'x-mcp-servers', 'x-openwebui-mcp-servers') ?? ''
  return {
    email,
    emailRejected: rawEmail !== undefined && email === undefined,
    name: cleanUserName(headerValue(headers, 'x-user-name', 'x-openwebui-user-name')),
    mcpServers: [...new Set(servers.split(',').map(s => s.trim().toLowerCase()).filter(s => MCP_SERVER.test(s)))],
    credentials
  }
}

/** How a request's chat was decided on /mcp (§1.2, §1.4). */
export type ChatResolution =
  | { kind: 'chat', chatId: string, /** lenient mode without header: results get the note */ lenientNote: boolean }
  | { kind: 'invalid', reason: string }
  | { kind: 'missing' } // strict mode, no header

/** Resolves the chat of an /mcp request from X-Chat-Id / X-OpenWebUI-Chat-Id under SINGLE_USER_MODE. */
export function resolveMcpChat (headers: IncomingHttpHeaders, mode: SingleUserMode): ChatResolution {
  if (mode === 'true') return { kind: 'chat', chatId: 'default', lenientNote: false }
  const raw = headerValue(headers, 'x-chat-id', 'x-openwebui-chat-id')
  if (raw === undefined) {
    return mode === 'false' ? { kind: 'missing' } : { kind: 'chat', chatId: 'default', lenientNote: true }
  }
  const chatId = normalizeChatId(raw)
  return chatId === null ? { kind: 'invalid', reason: 'must match ^[a-z0-9][a-z0-9_:-]{0,63}$ after lowercasing' } : { kind: 'chat', chatId, lenientNote: false }
}
