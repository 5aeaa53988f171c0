/*
 * Apps on their own origins (APPS_DOMAIN, docs/features.md#app-preview-urls): with a wildcard DNS name,
 * each app is served at `<scheme>://<chat key>-<port>.<APPS_DOMAIN>[:<port of PUBLIC_BASE_URL>]/`, so it
 * shares no cookie, storage or service worker with the server's origin nor with another app. A request
 * to such a host is rewritten before routing to the app route (`/apps/<chat>/<port>/<path>`) and marked,
 * so the route serves it with the app at the root of its own origin. The host names the chat only by its
 * key (a hash): the server learns which chat a key is from the links it hands out, every ensure of a
 * sandbox, and a cookie it sets on the app's origin (checked against the key), so that an open app
 * survives a server restart. Everything here is cheap and bounded: it runs before routing on every request.
 */
import type { IncomingMessage } from 'node:http'
import { chatKey, normalizeChatId } from '../../core/chat-id.js'
import { appPort } from './listening.js'

/** The cookie that names the chat of an app origin (its value is checked against the host's key). */
export const CHAT_COOKIE = 'cubicle_app_chat'  // headers.ts keeps it from the app both ways
/** Where an app host whose chat is not known is sent (a route of routes.ts answers it). */
export const UNKNOWN_APP_PATH = '/apps-origin/unknown'

/** A DNS name of lowercase labels (no trailing dot). */
const DOMAIN = /^(?=.{1,200}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$/
const LABEL = /^([0-9a-f]{32})-([0-9]{4,5})$/
const KEYS_KEPT = 10_000
const APP_HOST = Symbol('cubicle.appHost')

/** What routes.ts learns of a request rewritten for an app host. */
export interface AppHost { origin: string, host: string, chatId: string, port: number }

export interface AppOrigins {
  /** `<scheme>://<key>-<port>.<domain>[:port]` of the app (no trailing slash). */
  originOf: (chatId: string, port: number) => string
  /** The chat whose key this is, when known (remembered at once). */
  remember: (chatId: string) => void
  /** The rewrite of core's addUrlRewrite. */
  rewrite: (request: IncomingMessage) => string | undefined
  /** The app host of a rewritten request, undefined for any other. */
  hostOf: (request: IncomingMessage) => AppHost | undefined
}

/** Checks APPS_DOMAIN: undefined when empty (the path form), else the lowercase name. Throws a readable error. */
export function parseAppsDomain (raw: string, publicBaseUrl: string): string | undefined {
  const domain = raw.trim().toLowerCase().replace(/\.$/, '')
  if (domain === '') return undefined
  if (!DOMAIN.test(domain)) throw new Error(`APPS_DOMAIN must be a DNS name such as apps.example.com (wildcard *.apps.example.com pointing at this server), not ${JSON.stringify(raw.slice(0, 100))}`)
  const server = new URL(publicBaseUrl).hostname.toLowerCase()
  if (server === domain) throw new Error('APPS_DOMAIN must not be PUBLIC_BASE_URL\'s host: apps are served on its subdomains <key>-<port>.APPS_DOMAIN')
  return domain
}

/** The value of one cookie in a Cookie header (first occurrence), reading at most 8 KiB of it. */
function cookieValue (header: string | string[] | undefined, name: string): string | undefined {
  if (typeof header !== 'string') return undefined
  for (const part of header.slice(0, 8192).split(';')) {
    const eq = part.indexOf('=')
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim()
  }
  return undefined
}

export function createAppOrigins (domain: string, publicBaseUrl: string): AppOrigins {
  const base = new URL(publicBaseUrl)
  const portSuffix = base.port === '' ? '' : `:${base.port}`
  /** chat key → chat id (oldest forgotten first) */
  const chats = new Map<string, string>()

  const remember = (chatId: string): void => {
    const key = chatKey(chatId)
    chats.delete(key)
    chats.set(key, chatId)
    if (chats.size > KEYS_KEPT) chats.delete(chats.keys().next().value as string)
  }

  const chatOfKey = (key: string, request: IncomingMessage): string | undefined => {
    const known = chats.get(key)
    if (known !== undefined) return known
    const named = cookieValue(request.headers.cookie, CHAT_COOKIE)
    if (named === undefined || named.length > 64 || normalizeChatId(named) !== named || chatKey(named) !== key) return undefined
    remember(named)
    return named
  }

  return {
    originOf: (chatId, port) => `${base.protocol}//${chatKey(chatId)}-${port}.${domain}${portSuffix}`,
    remember,
    rewrite (request) {
      const rawHost = request.headers.host
      if (typeof rawHost !== 'string' || rawHost.length > 300) return undefined
      const host = rawHost.toLowerCase()
      const colon = host.lastIndexOf(':')
      const name = colon > 0 && !host.endsWith(']') ? host.slice(0, colon) : host
      if (!name.endsWith(`.${domain}`)) return undefined
      const m = LABEL.exec(name.slice(0, -(domain.length + 1)))
      const port = m === null ? undefined : appPort(m[2] as string)
      const chatId = m === null ? undefined : chatOfKey(m[1] as string, request)
      const url = request.url ?? '/'
      if (port === undefined || chatId === undefined) return UNKNOWN_APP_PATH
      ;(request as IncomingMessage & { [APP_HOST]?: AppHost })[APP_HOST] = { origin: `${base.protocol}//${host}`, host, chatId, port }
      return `/apps/${chatId}/${port}${url.startsWith('/') ? url : `/${url}`}`
    },
    hostOf: request => (request as IncomingMessage & { [APP_HOST]?: AppHost })[APP_HOST]
  }
}
