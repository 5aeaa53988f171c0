import fp from 'fastify-plugin'
import fastifyStatic from '@fastify/static'
import type { FastifyPluginAsync, FastifyReply } from 'fastify'
import { assetDir } from '../../core/asset-dir.js'
import { parseOptions } from '../../core/config.js'
import { PreviewOptions } from './schemas.js'
import { VENDOR, packageDir } from './vendor.js'
import routes, { previewConfig } from './routes.js'
import { createViewBuilder } from './app-view.js'
import type { PreviewPage } from './types.js'
import terminalPage from './terminal-page.js'

/**
 * The preview page (docs/contract.md#preview-page, docs/contract.md#browser-and-terminal): GET /preview/{chat} serves an HTML shell with
 * the chat's config; the single-page app and its npm-vendored libraries come from /static/* (public, no
 * chat data). Agent content is shown only in sandboxed iframes or after DOMPurify.
 */
const preview: FastifyPluginAsync<PreviewOptions> = async (fastify, raw) => {
  const opts = parseOptions(PreviewOptions, raw, 'preview')
  const publicDir = opts.publicDir !== '' ? opts.publicDir : assetDir(import.meta.url, 'preview', 'public')
  // Public assets, no chat data: readable cross-origin, because the page may run in an opaque-origin
  // iframe (docs/contract.md#open-webui), where its module script is a CORS request.
  const nosniff = (reply: FastifyReply): void => {
    reply.header('X-Content-Type-Options', 'nosniff').header('Access-Control-Allow-Origin', '*')
  }

  await fastify.register(fastifyStatic, { root: publicDir, prefix: '/static/preview/', decorateReply: false, index: false, list: false, dotfiles: 'deny', setHeaders: nosniff })
  for (const v of VENDOR) {
    const allowed = new Set(v.files.map(f => `/${f}`))
    await fastify.register(fastifyStatic, {
      root: packageDir(v.pkg, import.meta.url),
      prefix: `/static/vendor/${v.alias}/`,
      decorateReply: false,
      index: false,
      list: false,
      dotfiles: 'deny',
      setHeaders: nosniff,
      // Only the listed dist files: never a package's sources, tests or package.json.
      allowedPath: pathName => allowed.has(pathName)
    })
  }
  const root = `${fastify.links.publicBaseUrl}/`
  const views = createViewBuilder({ root, publicDir })
  const page: PreviewPage = {
    config: (chatId, used) => previewConfig(fastify, opts.parseTimeoutMs, chatId, used),
    appView: async view => await views.html(view)
  }
  fastify.decorate('previewPage', page)
  await fastify.register(routes, { frameAncestors: opts.frameAncestors, parseTimeoutMs: opts.parseTimeoutMs })
  await fastify.register(terminalPage, { frameAncestors: opts.frameAncestors })
}

export default fp(preview, {
  name: 'preview',
  fastify: '5.x',
  dependencies: ['capabilities'],
  decorators: { fastify: ['auth', 'links'] }
})
