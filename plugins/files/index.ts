import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import { FilesOptions } from './schemas.js'
import { createFilesService } from './service.js'
import routes from './routes.js'

/**
 * Files out to the human (docs/contract.md#files-and-uploads): downloads from the chat's outputs dir, the streamed zip archive
 * and the typed outputs listing. Every route takes the API key or a files token of that chat (docs/contract.md#capability-tokens) and
 * reads only through descriptors verified to lie inside the outputs dir (docs/contract.md#path-rules), which chat storage locates.
 */
const files: FastifyPluginAsync<FilesOptions> = async (fastify, raw) => {
  const opts = parseOptions(FilesOptions, raw, 'files')
  const service = createFilesService({ links: fastify.links, storage: fastify.chatStorage, log: fastify.log.child({ plugin: 'files' }) }, opts)
  await fastify.register(routes, { service, frameAncestors: opts.frameAncestors })
}

export default fp(files, {
  name: 'files',
  fastify: '5.x',
  dependencies: ['capabilities', 'chat-storage'],
  decorators: { fastify: ['auth', 'links', 'chatStorage'] }
})
