import type { FastifyInstance, FastifyPluginAsync } from 'fastify'
import { chatAccess, chatOf, chatRoutes, linkToken } from '../../core/route-kit.js'
import { ChatParams, ChatQuery, HAND_CHECKED, mediaReply } from '../../core/route-schema.js'
import { newNonce, renderPage, sendPage } from './page.js'
import type { PreviewConfig } from './schemas.js'

export interface PreviewRoutesOptions { frameAncestors: string, parseTimeoutMs: number }

const routes: FastifyPluginAsync<PreviewRoutesOptions> = async (fastify, opts) => {
  const pageConfig = (chatId: string, used: string | undefined): PreviewConfig => previewConfig(fastify, opts.parseTimeoutMs, chatId, used)

  // Chat route: readable from the opaque-origin iframe Open WebUI embeds it in (docs/contract.md#capability-tokens, docs/contract.md#open-webui).
  chatRoutes(fastify, ['/preview/:chat'])

  fastify.get<{ Params: { chat: string } }>('/preview/:chat', {
    ...HAND_CHECKED,
    schema: { summary: 'The chat\'s preview page: outputs, and with a control token the live browser and terminal (HTML)', tags: ['files'], params: ChatParams, querystring: ChatQuery, produces: ['text/html'], response: { 200: mediaReply('the preview page', ['text/html']) } },
    preHandler: chatAccess('f')
  }, async (request, reply) => {
    const config = pageConfig(chatOf(request), linkToken(request))
    const nonce = newNonce()
    return await sendPage(reply, renderPage(config, nonce), opts.frameAncestors, nonce)
  })
}

/**
 * Files-only UI for a files token, full UI for a control token or the API key. The page's data URLs
 * carry a files token, so links it shows never grant more than reading outputs. An API-key opener
 * (a server-side client) gets a control token for the full UI; in open mode there are no tokens.
 */
export function previewConfig (fastify: FastifyInstance, parseTimeoutMs: number, chatId: string, used: string | undefined): PreviewConfig {
  const { auth, links } = fastify
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
  const query = filesToken === undefined ? '' : `?t=${filesToken}`
  const egressBase = `/api/egress/${encodeURIComponent(chatId)}`
  return {
    chatId,
    apiUrl: `/api/outputs/${encodeURIComponent(chatId)}${query}`,
    filesBase: new URL(links.filesBase(chatId)).pathname,
    scope,
    token,
    parseTimeoutMs,
    // The egress plugin is optional (ENABLE_NETWORK=false setups may leave it out of the manifest).
    egress: fastify.hasDecorator('egress') ? { policy: `${egressBase}${query}`, log: `${egressBase}/log${query}` } : null,
    // App preview URLs are optional too (the ports plugin); their listing needs the control scope.
    apps: fastify.hasDecorator('ports') && scope === 'full' ? { list: `/api/apps/${encodeURIComponent(chatId)}${token === null ? '' : `?t=${token}`}` } : null
  }
}

export default routes
