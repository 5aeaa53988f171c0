import fp from 'fastify-plugin'
import fastifyStatic from '@fastify/static'
import type { FastifyPluginAsync, FastifyReply } from 'fastify'
import Type, { type Static } from 'typebox'
import { assetDir } from '../../core/asset-dir.js'
import { parseOptions } from '../../core/config.js'
import { ICON_NAMES, ICON_PREFIX, iconsOf } from './icons.js'

export const IconsOptions = Type.Object({
  publicBaseUrl: Type.String({ minLength: 1, description: 'PUBLIC_BASE_URL: the origin the icon URLs name' })
})
export type IconsOptions = Static<typeof IconsOptions>

/**
 * The server's and the tools' icons (docs/contract.md#icons): GET /icons/<name>.png|.svg from public/,
 * public and cacheable, and an `icons` entry on every tool of tools/list that has a file pair here.
 * The server's own icon reaches serverInfo through mcp-transport's `serverIcons` option.
 */
const icons: FastifyPluginAsync<IconsOptions> = async (fastify, raw) => {
  const opts = parseOptions(IconsOptions, raw, 'icons')
  const served = new Set(ICON_NAMES.flatMap(name => [`/${name}.png`, `/${name}.svg`]))
  const headers = (reply: FastifyReply, path: string): void => {
    // No chat data: any page may show them (Access-Control-Allow-Origin for clients that fetch
    // them before drawing). An SVG opened on its own runs no script and loads nothing.
    reply.header('X-Content-Type-Options', 'nosniff').header('Access-Control-Allow-Origin', '*')
      .header('Cross-Origin-Resource-Policy', 'cross-origin')
    if (path.endsWith('.svg')) reply.header('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'")
  }
  await fastify.register(fastifyStatic, {
    root: assetDir(import.meta.url, 'icons', 'public'),
    prefix: `${ICON_PREFIX}/`,
    decorateReply: false,
    index: false,
    list: false,
    dotfiles: 'deny',
    // A day in caches; the ETag makes a revalidation after that a 304.
    maxAge: '1d',
    setHeaders: headers,
    allowedPath: pathName => served.has(pathName)
  })

  if (fastify.hasDecorator('mcp')) {
    const known = new Set(ICON_NAMES)
    fastify.mcp.transformToolList(tools => tools.map(tool =>
      tool.icons !== undefined || !known.has(tool.name) ? tool : { ...tool, icons: iconsOf(opts.publicBaseUrl, tool.name) }))
  }
}

export default fp(icons, { name: 'icons', fastify: '5.x' })
