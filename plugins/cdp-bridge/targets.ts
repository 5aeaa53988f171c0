/*
 * What the DevTools HTTP endpoints of a sandbox's browser answer is attacker-controlled (the sandbox
 * runs whatever the model or a page put there, possibly a fake "browser" on the CDP port). Answers are
 * reduced to known fields of known types with bounded lengths; ids must pass the docs/contract.md#browser pattern; every
 * address the sandbox names (webSocketDebuggerUrl, devtoolsFrontendUrl, …) is dropped and the relay
 * URL is built by the server from PUBLIC_BASE_URL.
 */
import type { BrowserPage, CdpTarget, CdpVersion } from './types.js'

export const TARGET_ID = /^[A-Za-z0-9_-]{1,64}$/

const MAX_TITLE = 1024
const MAX_URL = 8192
const VERSION_FIELDS = ['Browser', 'Protocol-Version', 'User-Agent', 'V8-Version', 'WebKit-Version'] as const

function text (value: unknown, max: number): string | undefined {
  if (typeof value !== 'string') return undefined
  return value.length > max ? value.slice(0, max) : value
}

function target (item: unknown): CdpTarget | undefined {
  if (typeof item !== 'object' || item === null || Array.isArray(item)) return undefined
  const o = item as Record<string, unknown>
  if (typeof o.id !== 'string' || !TARGET_ID.test(o.id)) return undefined
  const type = text(o.type, 32)
  if (type === undefined || !/^[a-z_]{1,32}$/.test(type)) return undefined
  const t: CdpTarget = { id: o.id, type, title: text(o.title, MAX_TITLE) ?? '', url: text(o.url, MAX_URL) ?? '' }
  const description = text(o.description, MAX_TITLE)
  if (description !== undefined && description !== '') t.description = description
  if (typeof o.parentId === 'string' && TARGET_ID.test(o.parentId)) t.parentId = o.parentId
  if (typeof o.attached === 'boolean') t.attached = o.attached
  return t
}

/** The target list of `/json/list`, at most `max` valid targets; throws when the answer is not a list. */
export function parseTargets (raw: unknown, max: number): CdpTarget[] {
  if (!Array.isArray(raw)) throw new Error('the target list is not an array')
  const out: CdpTarget[] = []
  for (const item of raw) {
    const t = target(item)
    if (t !== undefined) out.push(t)
    if (out.length >= max) break
  }
  return out
}

/** `/json/version` with only the descriptive fields (never webSocketDebuggerUrl). */
export function parseVersion (raw: unknown): CdpVersion {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new Error('the version answer is not an object')
  const out: CdpVersion = {}
  for (const key of VERSION_FIELDS) {
    const value = text((raw as Record<string, unknown>)[key], 512)
    if (value !== undefined) out[key] = value
  }
  return out
}

export const pagesOf = (targets: CdpTarget[]): BrowserPage[] =>
  targets.filter(t => t.type === 'page').map(t => ({ id: t.id, title: t.title, url: t.url }))

/**
 * `<ws|wss>://<PUBLIC host and path>/browser/{chat}/devtools/page/{id}` (+ `?t=` with the token the
 * request used). The scheme follows PUBLIC_BASE_URL's, never the request.
 */
export function publicSocketUrl (publicBaseUrl: string, chatId: string, targetId: string, token?: string): string {
  const base = new URL(publicBaseUrl)
  const scheme = base.protocol === 'https:' ? 'wss:' : 'ws:'
  const prefix = base.pathname.replace(/\/+$/, '')
  const query = token === undefined ? '' : `?t=${encodeURIComponent(token)}`
  return `${scheme}//${base.host}${prefix}/browser/${encodeURIComponent(chatId)}/devtools/page/${targetId}${query}`
}
