import { Readable } from 'node:stream'
import type { FastifyPluginAsync, FastifyReply } from 'fastify'
import { requireChatId } from '../../core/chat-id.js'
import { chatRouteCors } from '../../core/chat-route.js'
import { ChatParams as ChatParamsSchema, ChatPathParams, ChatQuery, HAND_CHECKED, mediaReply } from '../../core/route-schema.js'
import { parseRelPath } from '../../core/safe-path.js'
import { tokenOfPathSegment } from '../../core/tokens.js'
import { isRetryLater } from './errors.js'
import type { FilesService } from './service.js'
import { FileQuery, OutputsListing } from './schemas.js'
import { sendVerifiedFile } from './send-file.js'

export interface FilesRoutesOptions {
  service: FilesService
  frameAncestors: string
}

interface ChatParams { chat: string, '*'?: string }
type Query = Record<string, string | string[] | undefined>

/** docs/contract.md#chat-id-validation on the (once-decoded) path segment; 400 invalid_chat_id before anything else (docs/contract.md#general-http-rules). */
const chatIdOf = requireChatId

const flag = (value: unknown): boolean => value === '1' || value === 'true'

/** Busy answers (429) carry `Retry-After`; the error handler writes the body. */
async function retryAfterOnBusy<T> (reply: FastifyReply, work: () => Promise<T>): Promise<T> {
  try {
    return await work()
  } catch (err) {
    if (isRetryLater(err)) reply.header('Retry-After', String(err.retryAfter))
    throw err
  }
}

const routes: FastifyPluginAsync<FilesRoutesOptions> = async (fastify, opts) => {
  const { service, frameAncestors } = opts

  chatRouteCors(fastify, ['/files/:chat/*', '/api/outputs/:chat'])

  // Chat id, token and path are checked by hand, in that order, with coded errors (docs/contract.md#url-shapes): HAND_CHECKED.
  fastify.get<{ Params: ChatParams, Querystring: Query }>('/files/:chat/*', {
    ...HAND_CHECKED,
    schema: {
      summary: 'A published output file of the chat (the path may start with a `~<token>` segment), or `archive`: all outputs as a zip',
      tags: ['files'],
      params: ChatPathParams,
      querystring: FileQuery,
      response: { 200: mediaReply('the file (its own type; HEAD for the headers only), or the zip of /archive', ['application/octet-stream', 'application/zip']) }
    }
  }, async (request, reply) => {
    const chatId = chatIdOf(request.params.chat)
    let rest = request.params['*'] ?? ''
    const slash = rest.indexOf('/')
    const first = slash === -1 ? rest : rest.slice(0, slash)
    // A first segment of token shape after /files/{chat}/ is a capability token, never a file name (docs/contract.md#url-shapes).
    const pathToken = tokenOfPathSegment(first)
    if (pathToken !== undefined) rest = slash === -1 ? '' : rest.slice(slash + 1)
    fastify.auth.authorizeChat(request, chatId, 'f', pathToken)
    if (rest === 'archive' && !flag(request.query.raw)) {
      const zip = await retryAfterOnBusy(reply, async () => await service.archive(chatId))
      reply.header('Content-Type', 'application/zip')
        .header('Content-Disposition', `attachment; filename="chat-${chatId}-outputs.zip"`)
        .header('Cache-Control', 'no-store')
        .header('X-Content-Type-Options', 'nosniff')
      if (request.method === 'HEAD') {
        zip.destroy()
        return await reply.send(Readable.from([]))
      }
      return await reply.send(zip)
    }
    const segments = parseRelPath(rest)
    const { handle, name } = await service.open(chatId, segments)
    return await sendVerifiedFile(request, reply, handle, name, { frameAncestors, download: flag(request.query.download) })
  })

  fastify.get<{ Params: ChatParams }>('/api/outputs/:chat', {
    ...HAND_CHECKED,
    schema: { summary: 'The chat\'s published outputs with size, time and public URL', tags: ['files'], params: ChatParamsSchema, querystring: ChatQuery, response: { 200: OutputsListing } }
  }, async (request, reply) => {
    const chatId = chatIdOf(request.params.chat)
    fastify.auth.authorizeChat(request, chatId, 'f')
    const body = await retryAfterOnBusy(reply, async () => await service.list(chatId))
    // Already serialised (one buffer shared by every waiter and the cache): the response schema documents it.
    return await reply.header('Cache-Control', 'no-cache, no-store, must-revalidate')
      .header('Content-Type', 'application/json; charset=utf-8').send(body)
  })
}

export default routes
