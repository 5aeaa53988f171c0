import type { FastifyPluginAsync } from 'fastify'
import { chatAccess, chatOf, chatParamHook, chatRoutes, requireKey } from '../../core/route-kit.js'
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
  chatRoutes(fastify, ['/api/egress/:chat', '/api/egress/:chat/log'])
  const { egress } = fastify
  // After the schema (preHandler): reads need the chat's files token or the key, changes the key itself.
  const read = chatAccess('f')
  const change = [requireKey, chatParamHook]

  fastify.get<{ Params: ChatParams }>('/api/egress/:chat', {
    schema: { summary: 'The chat\'s effective egress policy: mode, its source (chat, user or server), rules', tags: ['egress'], params: ChatParams, querystring: ChatQuery, response: { 200: PolicyReply, '4xx': ErrorResponse } },
    preHandler: read
  }, async request => await egress.effective(chatOf(request)))

  fastify.put<{ Params: ChatParams, Body: OverrideBody }>('/api/egress/:chat', {
    schema: { summary: 'Sets the chat\'s egress override ({mode, allow}); applies to its next connection', tags: ['egress'], params: ChatParams, querystring: ChatQuery, body: OverrideBody, response: { 200: PolicyReply, '4xx': ErrorResponse } },
    preHandler: change
  }, async request => {
    const chatId = chatOf(request)
    const effective = await egress.setOverride(chatId, { mode: request.body.mode ?? null, allow: request.body.allow ?? [] })
    request.log.info({ chatId, mode: request.body.mode ?? null, rules: request.body.allow?.length ?? 0 }, 'egress override set')
    return effective
  })

  fastify.delete<{ Params: ChatParams }>('/api/egress/:chat', {
    schema: { summary: 'Clears the chat\'s egress override', tags: ['egress'], params: ChatParams, querystring: ChatQuery, response: { 200: PolicyReply, '4xx': ErrorResponse } },
    preHandler: change
  }, async request => await egress.setOverride(chatOf(request), null))

  fastify.get<{ Params: ChatParams }>('/api/egress/:chat/log', {
    schema: { summary: 'The chat\'s last 200 proxied connections with decision and reason', tags: ['egress'], params: ChatParams, querystring: ChatQuery, response: { 200: LogReply, '4xx': ErrorResponse } },
    preHandler: read
  }, async (request, reply) => {
    void reply.header('Cache-Control', 'no-store')
    return { connections: egress.connections(chatOf(request)) }
  })
}

export default routes
