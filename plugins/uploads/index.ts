import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import { UploadsOptions } from './schemas.js'
import { createUploadsService } from './service.js'
import routes from './routes.js'

/**
 * Uploads (docs/contract.md#files-and-uploads): streamed, size-limited, atomically replaced files in the chat's uploads area
 * (chat storage), which the sandbox sees read-only at /mnt/user-data/uploads without a restart. Needs the sandbox service
 * (an upload touches the chat's sandbox; no Docker call) and the prompt renderer (its cache is invalidated).
 */
const uploads: FastifyPluginAsync<UploadsOptions> = async (fastify, raw) => {
  const opts = parseOptions(UploadsOptions, raw, 'uploads')
  const log = fastify.log.child({ plugin: 'uploads' })
  const service = createUploadsService({ log, storage: fastify.chatStorage }, opts)
  fastify.decorate('uploads', service)
  // An upload is activity of the chat (its sandbox stays up) and changes its prompt (the uploads list).
  const { sandbox, prompts } = fastify
  service.onUpload(({ chatId }) => {
    sandbox.touch(chatId)
    prompts.invalidate(chatId)
  })
  await fastify.register(routes, { service, maxBytes: opts.maxBytes })
}

export default fp(uploads, {
  name: 'uploads',
  fastify: '5.x',
  dependencies: ['sandbox', 'prompt-render', 'chat-storage'],
  decorators: { fastify: ['sandbox', 'prompts', 'chatStorage'] }
})
