import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import { ChatStorageOptions } from './schemas.js'
import { createChatStorage } from './service.js'

export type { ChatStorageOptions } from './schemas.js'

/**
 * Chat storage (docs/contract.md#derived-names): where a chat's uploads, outputs and state files live, and the
 * descriptor-based operations on them. Decorates `fastify.chatStorage`; every plugin that reads or
 * writes chat data goes through it instead of building DATA_DIR paths, so another storage engine
 * (a Kubernetes volume, object storage) replaces this one plugin.
 */
const chatStorage: FastifyPluginAsync<ChatStorageOptions> = async (fastify, raw) => {
  const opts = parseOptions(ChatStorageOptions, raw, 'chat-storage')
  fastify.decorate('chatStorage', createChatStorage({ dataDir: opts.dataDir }))
}

export default fp(chatStorage, { name: 'chat-storage', fastify: '5.x' })
