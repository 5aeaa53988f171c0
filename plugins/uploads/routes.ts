import multipart from '@fastify/multipart'
import type { FastifyPluginAsync } from 'fastify'
import { chatAccess, chatOf, chatRoutes } from '../../core/route-kit.js'
import { ErrorResponse } from '../../core/errors.js'
import { ChatParams as ChatParamsSchema, ChatPathParams, ChatQuery, HAND_CHECKED } from '../../core/route-schema.js'
import { parseRelPath } from '../../core/safe-path.js'
import { UPLOAD_MISSING_FILE, UPLOAD_NOT_MULTIPART } from './errors.js'
import { ManifestReply, UploadBody, UploadListReply, UploadReply } from './schemas.js'
import type { SavedUpload, UploadService } from './types.js'

export interface UploadsRoutesOptions { service: UploadService, maxBytes: number }

interface ChatParams { chat: string, '*'?: string }

const NO_CACHE = 'no-cache, no-store, must-revalidate'

const routes: FastifyPluginAsync<UploadsRoutesOptions> = async (fastify, opts) => {
  const { service, maxBytes } = opts
  // Encapsulated here: no other route gets a multipart parser. busboy stops one byte past the limit,
  // which the service's meter turns into a clean 413 with the partial file removed.
  await fastify.register(multipart, {
    limits: { fileSize: maxBytes + 1, files: 5, fields: 50, fieldSize: 64 * 1024, parts: 60, headerPairs: 200 }
  })
  // Before the access hook: refusals carry the CORS header too.
  chatRoutes(fastify, ['/api/uploads/:chat/*'])
  // Chat id (400) → credentials (401/403) before the body is read, so a refused upload never reaches
  // the disk (docs/contract.md#general-http-rules; docs/contract.md#capability-tokens: uploads need the control scope).
  fastify.addHook('onRequest', chatAccess('c'))

  // Checked by hand (chat id, credentials before the body is read, path, multipart): HAND_CHECKED.
  fastify.post<{ Params: ChatParams }>('/api/uploads/:chat/*', {
    ...HAND_CHECKED,
    schema: {
      summary: 'Stores one uploaded file (multipart field `file`) at the path below the chat\'s uploads',
      tags: ['uploads'],
      consumes: ['multipart/form-data'],
      params: ChatPathParams,
      querystring: ChatQuery,
      body: UploadBody,
      response: { 200: UploadReply, '4xx': ErrorResponse }
    }
  }, async (request) => {
    const chatId = chatOf(request)
    const segments = parseRelPath(request.params['*'] ?? '')
    if (!request.isMultipart()) throw new UPLOAD_NOT_MULTIPART()
    let saved: SavedUpload | undefined
    for await (const part of request.parts()) {
      if (part.type !== 'file') continue
      if (saved !== undefined || part.fieldname !== 'file') { part.file.resume(); continue }
      saved = await service.save(chatId, segments, part.file)
    }
    if (saved === undefined) throw new UPLOAD_MISSING_FILE()
    request.log.info({ chatId, size: saved.size }, 'upload stored')
    return { status: 'success' as const, ...saved }
  })

  fastify.get<{ Params: ChatParams }>('/api/uploads/:chat/manifest', {
    ...HAND_CHECKED,
    schema: { summary: 'MD5 of every uploaded file by path, to sync only what changed', tags: ['uploads'], params: ChatParamsSchema, querystring: ChatQuery, response: { 200: ManifestReply } }
  }, async (request, reply) => {
    reply.header('Cache-Control', NO_CACHE)
    return await service.manifest(chatOf(request))
  })

  fastify.get<{ Params: ChatParams }>('/api/uploads/:chat/list', {
    ...HAND_CHECKED,
    schema: { summary: 'The uploaded files with size and time', tags: ['uploads'], params: ChatParamsSchema, querystring: ChatQuery, response: { 200: UploadListReply } }
  }, async (request, reply) => {
    reply.header('Cache-Control', NO_CACHE)
    const files = await service.list(chatOf(request))
    return { files, total: files.length }
  })
}

export default routes
