import type { ChatScope } from '../../core/auth.js'

/**
 * Public URLs and capability tokens of a chat (docs/contract.md#capability-tokens, docs/contract.md#url-shapes). In open mode no token is
 * minted and every URL has the reference shape. All absolute URLs start with PUBLIC_BASE_URL.
 */
export interface LinkService {
  /** `v1.<scope>.<exp>.<sig>`, deterministic per UTC day; undefined in open mode. */
  token (chatId: string, scope: ChatScope): string | undefined
  /** Verifies a token for chat and scope (a `c` token also grants `f`). Constant-time. */
  verify (token: string, chatId: string, scope: ChatScope): 'ok' | 'forbidden'
  /** `<PUBLIC>/files/{chat}` or `<PUBLIC>/files/{chat}/~<files token>` (no trailing slash). */
  filesBase (chatId: string): string
  /** filesBase + '/' + each segment of relPath percent-encoded. relPath is relative to outputs. */
  fileUrl (chatId: string, relPath: string): string
  /** Same as fileUrl but without scheme and host (listing `url` fields). */
  filePath (chatId: string, relPath: string): string
  /** `<files base>/archive` */
  archiveUrl (chatId: string): string
  /** `<PUBLIC>/preview/{chat}` (+ `?t=<token>` of the given scope in protected mode). */
  previewUrl (chatId: string, scope?: ChatScope): string
  /** PUBLIC_BASE_URL without trailing slash. */
  readonly publicBaseUrl: string
}

declare module 'fastify' {
  interface FastifyInstance { links: LinkService }
}
