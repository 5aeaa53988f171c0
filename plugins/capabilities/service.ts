import { createHmac, timingSafeEqual } from 'node:crypto'
import type { ChatScope } from '../../core/auth.js'
import type { LinkService } from './types.js'

export interface LinkServiceOptions {
  apiKey: string
  signingKey: string
  tokenTtlSeconds: number
  publicBaseUrl: string
  /** Injectable clock (ms) for tests. */
  now?: () => number
}

const TOKEN = /^v1\.([fc])\.([0-9]{1,12})\.([A-Za-z0-9_-]{22})$/
const DAY = 86400

/** Percent-encodes each `/`-separated segment of a relative path (RFC 3986 unreserved kept). */
export function encodePath (relPath: string): string {
  return relPath.split('/').filter(s => s !== '').map(s => encodeURIComponent(s).replace(/[!'()*]/g, c => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)).join('/')
}

export function createLinkService (opts: LinkServiceOptions): LinkService {
  const now = opts.now ?? Date.now
  // Derived key: restarts keep links valid; rotating either key revokes every link (§6.1 item 1).
  const key = opts.apiKey === ''
    ? null
    : opts.signingKey !== '' ? Buffer.from(opts.signingKey, 'utf8') : createHmac('sha256', opts.apiKey).update('link-signing-v1').digest()
  const base = opts.publicBaseUrl.replace(/\/+$/, '')

  const sign = (scope: ChatScope, exp: number, chatId: string): string =>
    createHmac('sha256', key as Buffer).update(`v1|${scope}|${exp}|${chatId}`).digest().subarray(0, 16).toString('base64url')

  const service: LinkService = {
    publicBaseUrl: base,
    token (chatId, scope) {
      if (key === null) return undefined
      // Next UTC midnight after now + TTL: stable for a whole day, so cached prompts stay byte-identical.
      const exp = (Math.floor((Math.floor(now() / 1000) + opts.tokenTtlSeconds) / DAY) + 1) * DAY
      return `v1.${scope}.${exp}.${sign(scope, exp, chatId)}`
    },
    verify (token, chatId, scope) {
      if (key === null) return 'forbidden'
      const m = TOKEN.exec(token)
      if (m === null) return 'forbidden'
      const [, tokenScope, expRaw, sig] = m as unknown as [string, ChatScope, string, string]
      const exp = Number(expRaw)
      const expected = Buffer.from(sign(tokenScope, exp, chatId))
      const given = Buffer.from(sig)
      const valid = expected.length === given.length && timingSafeEqual(expected, given)
      if (!valid || exp * 1000 <= now()) return 'forbidden'
      return tokenScope === 'c' || scope === 'f' ? 'ok' : 'forbidden'
    },
    filesBase (chatId) {
      const t = service.token(chatId, 'f')
      return `${base}/files/${encodeURIComponent(chatId)}${t === undefined ? '' : `/~${t}`}`
    },
    fileUrl (chatId, relPath) { return `${service.filesBase(chatId)}/${encodePath(relPath)}` },
    filePath (chatId, relPath) { return service.fileUrl(chatId, relPath).slice(base.length) },
    archiveUrl (chatId) { return `${service.filesBase(chatId)}/archive` },
    previewUrl (chatId, scope = 'c') {
      const t = service.token(chatId, scope)
      return `${base}/preview/${encodeURIComponent(chatId)}${t === undefined ? '' : `?t=${t}`}`
    }
  }
  return service
}
