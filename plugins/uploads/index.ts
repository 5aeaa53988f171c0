import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import { UploadsOptions } from './schemas.js'
import { createUploadsService } from './service.js'
import routes from './routes.js'

/**
 * Uploads (surface.md §6.3): streamed, size-limited, atomically replaced files in the chat's uploads dir,
 * which the sandbox sees read-only at /mnt/user-data/uploads without a restart. Works without Docker.
 */
const uploads: FastifyPluginAsync<UploadsOptions> = async (fastify, raw) => {
  const opts = parseOptions(UploadsOptions, raw, 'uploads')
  const log = fastify.log.child({ plugin: 'uploads' })
  const service = createUploadsService({ log }, opts)
  fastify.decorate('uploads', service)
  // Optional neighbours, looked up per upload so that the manifest order does not matter and the
  // plugin keeps working with the sandbox or the renderer switched off.
  service.onUpload(({ chatId }) => {
    if (fastify.hasDecorator('sandbox')) fastify.sandbox.touch(chatId)
    if (fastify.hasDecorator('prompts')) fastify.prompts.invalidate(chatId)
  })
  await fastify.register(routes, { service, maxBytes: opts.maxBytes })
}

export default fp(uploads, { name: 'uploads', fastify: '5.x' })
