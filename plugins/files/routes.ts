import { Readable } from 'node:stream'
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import { chatAccess, chatOf, chatRoutes } from '../../core/route-kit.js'
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

/**
 * The path after /files/{chat}/ and the capability token in its first segment, if that segment has
 * token shape (docs/contract.md#url-shapes): such a segment is a token, never a file name.
 */
function splitPathToken (request: FastifyRequest): { pathToken: string | undefined, rest: string } {
  const rest = (request.params as ChatParams)['*'] ?? ''
  const slash = rest.indexOf('/')
  const pathToken = tokenOfPathSegment(slash === -1 ? rest : rest.slice(0, slash))
  if (pathToken === undefined) return { pathToken, rest }
  return { pathToken, rest: slash === -1 ? '' : rest.slice(slash + 1) }
}

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

  chatRoutes(fastify, ['/files/:chat/*', '/api/outputs/:chat'])

  // Chat id (docs/contract.md#chat-id-validation on the once-decoded segment, 400 invalid_chat_id
  // before anything else: docs/contract.md#general-http-rules), token and path are checked by hand,
  // in that order, with coded errors (docs/contract.md#url-shapes): HAND_CHECKED.
  fastify.get<{ Params: ChatParams, Querystring: Query }>('/files/:chat/*', {
    ...HAND_CHECKED,
    preHandler: chatAccess('f', { pathToken: request => splitPathToken(request).pathToken }),
    schema: {
      summary: 'A published output file of the chat (the path may start with a `~<token>` segment), or `archive`: all outputs as a zip',
      tags: ['files'],
      params: ChatPathParams,
      querystring: FileQuery,
      response: { 200: mediaReply('the file (its own type; HEAD for the headers only), or the zip of /archive', ['application/octet-stream', 'application/zip']) }
    }
  }, async (request, reply) => {
    const chatId = chatOf(request)
    const { rest } = splitPathToken(request)
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
    schema: { summary: 'The chat\'s published outputs with size, time and public URL', tags: ['files'], params: ChatParamsSchema, querystring: ChatQuery, response: { 200: OutputsListing } },
    preHandler: chatAccess('f')
  }, async (request, reply) => {
    const chatId = chatOf(request)
    const body = await retryAfterOnBusy(reply, async () => await service.list(chatId))
    // Already serialised (one buffer shared by every waiter and the cache): the response schema documents it.
    return await reply.header('Cache-Control', 'no-cache, no-store, must-revalidate')
      .header('Content-Type', 'application/json; charset=utf-8').send(body)
  })
}

export default routes
