import type { FastifyPluginAsync } from 'fastify'
import { chatRouteCors } from '../../core/chat-route.js'
import { requireChatId } from '../../core/chat-id.js'
import { ErrorResponse } from '../../core/errors.js'
import { ChatParams, LogReply, OverrideBody, PolicyReply } from './schemas.js'
import { ChatQuery } from '../../core/route-schema.js'

/*
 * GET    /api/egress/:chat       the chat's effective policy (API key or the chat's capability token)
 * PUT    /api/egress/:chat       sets the chat's override (API key only): { mode?, allow? }; stored on disk
 * DELETE /api/egress/:chat       clears it (API key only)
 * GET    /api/egress/:chat/log   the chat's recent connections, oldest first (API key or token)
 * Changes apply to the chat's next connection; the sandbox is not restarted.
 */
const routes: FastifyPluginAsync = async fastify => {
  chatRouteCors(fastify, ['/api/egress/:chat', '/api/egress/:chat/log'])
  const { egress, auth } = fastify

  fastify.get<{ Params: ChatParams }>('/api/egress/:chat', {
    schema: { summary: 'The chat\'s effective egress policy: mode, its source (chat, user or server), rules', tags: ['egress'], params: ChatParams, querystring: ChatQuery, response: { 200: PolicyReply, '4xx': ErrorResponse } }
  }, async request => {
    const chatId = requireChatId(request.params.chat)
    auth.authorizeChat(request, chatId, 'f')
    return await egress.effective(chatId)
  })

  fastify.put<{ Params: ChatParams, Body: OverrideBody }>('/api/egress/:chat', {
    schema: { summary: 'Sets the chat\'s egress override ({mode, allow}); applies to its next connection', tags: ['egress'], params: ChatParams, querystring: ChatQuery, body: OverrideBody, response: { 200: PolicyReply, '4xx': ErrorResponse } }
  }, async (request, reply) => {
    await auth.requireApiKey(request, reply)
    const chatId = requireChatId(request.params.chat)
    const effective = await egress.setOverride(chatId, { mode: request.body.mode ?? null, allow: request.body.allow ?? [] })
    request.log.info({ chatId, mode: request.body.mode ?? null, rules: request.body.allow?.length ?? 0 }, 'egress override set')
    return effective
  })

  fastify.delete<{ Params: ChatParams }>('/api/egress/:chat', {
    schema: { summary: 'Clears the chat\'s egress override', tags: ['egress'], params: ChatParams, querystring: ChatQuery, response: { 200: PolicyReply, '4xx': ErrorResponse } }
  }, async (request, reply) => {
    await auth.requireApiKey(request, reply)
    const chatId = requireChatId(request.params.chat)
    return await egress.setOverride(chatId, null)
  })

  fastify.get<{ Params: ChatParams }>('/api/egress/:chat/log', {
    schema: { summary: 'The chat\'s last 200 proxied connections with decision and reason', tags: ['egress'], params: ChatParams, querystring: ChatQuery, response: { 200: LogReply, '4xx': ErrorResponse } }
  }, async (request, reply) => {
    const chatId = requireChatId(request.params.chat)
    auth.authorizeChat(request, chatId, 'f')
    void reply.header('Cache-Control', 'no-store')
    return { connections: egress.connections(chatId) }
  })
}

export default routes
