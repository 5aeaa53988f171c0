import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import { normalizeChatId } from '../../core/chat-id.js'
import { CORE_INVALID_CHAT_ID } from '../../core/errors.js'
import { pageCsp, renderPage } from './page.js'
import type { PreviewConfig } from './schemas.js'

export interface PreviewRoutesOptions { frameAncestors: string }

async function preflight (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  return await reply.code(204)
    .header('Access-Control-Allow-Methods', 'GET, POST, OPTIONS')
    .header('Access-Control-Allow-Headers', 'Authorization, Content-Type')
    .header('Access-Control-Max-Age', '600')
    .send()
}

const routes: FastifyPluginAsync<PreviewRoutesOptions> = async (fastify, opts) => {
  const { auth, links } = fastify
  const csp = pageCsp(opts.frameAncestors)

  // Chat route: readable from the opaque-origin iframe Open WebUI embeds it in (§6.1 item 6, §12.2 item 5).
  fastify.addHook('onRequest', async (request, reply) => { reply.header('Access-Control-Allow-Origin', '*') })
  fastify.options('/preview/:chat', preflight)

  fastify.get<{ Params: { chat: string } }>('/preview/:chat', async (request, reply) => {
    const chatId = normalizeChatId(request.params.chat)
    if (chatId === null) throw new CORE_INVALID_CHAT_ID('must match ^[a-z0-9][a-z0-9_:-]{0,63}$')
    const used = auth.authorizeChat(request, chatId, 'f')
    const config = pageConfig(chatId, used)
    return await reply
      .header('Content-Type', 'text/html; charset=utf-8')
      .header('Content-Security-Policy', csp)
      .header('Cache-Control', 'no-cache, no-store, must-revalidate')
      .header('X-Content-Type-Options', 'nosniff')
      .send(renderPage(config))
  })

  /**
   * Files-only UI for a files token, full UI for a control token or the API key. The page's data URLs
   * carry a files token, so links it shows never grant more than reading outputs. An API-key opener
   * (a server-side client) gets a control token for the full UI; in open mode there are no tokens.
   */
  function pageConfig (chatId: string, used: string | undefined): PreviewConfig {
    let scope: PreviewConfig['scope'] = 'full'
    let token: string | null = null
    if (auth.protectedMode) {
      if (used === undefined) token = links.token(chatId, 'c') ?? null
      else {
        token = used
        scope = links.verify(used, chatId, 'c') === 'ok' ? 'full' : 'files'
      }
    }
    const filesToken = links.token(chatId, 'f')
    return {
      chatId,
      apiUrl: `/api/outputs/${encodeURIComponent(chatId)}${filesToken === undefined ? '' : `?t=${filesToken}`}`,
      filesBase: new URL(links.filesBase(chatId)).pathname,
      scope,
      token
    }
  }
}

export default routes
