import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { createFailureThrottle } from '../../core/failure-throttle.js'
import { requireKey } from '../../core/route-kit.js'
import type { AuthorizationServer } from './provider.js'
import { SCOPE, UserParams } from './schemas.js'
import type { OAuthService } from './types.js'

export interface RoutesDeps {
  server: AuthorizationServer
  service: OAuthService
  publicBaseUrl: string
  resourcePath: string
  prefix: string
  registrationsPerMinute: number
  /** Registrations per minute from all addresses together. */
  registrationsPerMinuteTotal: number
}

/** RFC 9728 metadata of the protected resource `/mcp`. */
export function resourceMetadata (publicBaseUrl: string, resource: string): Record<string, unknown> {
  return {
    resource,
    authorization_servers: [publicBaseUrl],
    scopes_supported: [SCOPE],
    bearer_methods_supported: ['header'],
    resource_name: 'Cubicle',
    resource_documentation: `${publicBaseUrl}/`
  }
}

/**
 * The discovery documents, the provider's own endpoints (raw, below the prefix: its Koa app reads
 * the body itself) and the operator's user routes (bearer key only).
 */
export default async function oauthRoutes (fastify: FastifyInstance, { deps }: { deps: RoutesDeps }): Promise<void> {
  const { server, service, prefix } = deps
  const registrations = createFailureThrottle({ limit: deps.registrationsPerMinute, now: Date.now })
  // One key for everybody: many addresses together cannot register faster than this either.
  const allRegistrations = createFailureThrottle({ limit: deps.registrationsPerMinuteTotal, now: Date.now })
  const metadata = resourceMetadata(deps.publicBaseUrl, service.resource)

  // Bodies stay unread for the provider: it parses and bounds them (56 KiB) itself.
  fastify.removeAllContentTypeParsers()
  fastify.addContentTypeParser('*', (_request, _payload, done) => { done(null) })

  for (const url of ['/.well-known/oauth-protected-resource', `/.well-known/oauth-protected-resource${deps.resourcePath}`]) {
    fastify.get(url, { schema: { tags: ['oauth'], summary: 'OAuth protected-resource metadata of /mcp (RFC 9728)' } }, async (_request, reply) => await reply.header('Cache-Control', 'max-age=300').header('Access-Control-Allow-Origin', '*').send(metadata))
  }

  async function passThrough (request: FastifyRequest, reply: FastifyReply, innerUrl: string): Promise<void> {
    // Dynamic registration needs no credential (RFC 7591), so it is counted per address and in total.
    if (request.method === 'POST' && innerUrl.startsWith('/register')) {
      const mine = registrations.fail(request.ip)
      const all = mine.throttled ? undefined : allRegistrations.fail('all')
      if (all?.firstThrottled === true) request.log.warn({ limit: deps.registrationsPerMinuteTotal }, 'oauth client registrations throttled for every address this minute')
      const verdict = all?.throttled === true ? all : mine.throttled ? mine : undefined
      if (verdict !== undefined) {
        const why = verdict === mine ? 'too many client registrations from this address' : 'too many client registrations on this server right now'
        await reply.code(429).header('Retry-After', String(verdict.retryAfter))
          .send({ error: 'too_many_requests', error_description: `${why}; try again in ${verdict.retryAfter} seconds`, detail: why })
        return
      }
    }
    reply.hijack()
    for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) reply.raw.setHeader(name, value)
    await server.handle(request.raw, reply.raw, innerUrl, request.ip)
  }

  for (const url of ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']) {
    fastify.get(url, { schema: { tags: ['oauth'], summary: 'Authorization server metadata (RFC 8414)' } }, async (request, reply) => { await passThrough(request, reply, '/.well-known/openid-configuration') })
  }
  fastify.all(`${prefix}/*`, { schema: { tags: ['oauth'], summary: 'The authorization server\'s own endpoints (authorize, token, registration, revocation, keys), answered by oidc-provider' } }, async (request, reply) => {
    await passThrough(request, reply, request.url.slice(prefix.length))
  })

  fastify.get(`${prefix}/users`, { schema: { tags: ['oauth'], summary: 'Who signed in through OAuth: how, when, with which apps, which chat is theirs' } }, async (request, reply) => {
    await requireKey(request, reply)
    return { users: service.listUsers() }
  })
  fastify.delete<{ Params: UserParams }>(`${prefix}/users/:subject`, { schema: { tags: ['oauth'], summary: 'Ends every grant and token of one user at once', params: UserParams } }, async (request, reply) => {
    await requireKey(request, reply)
    return { revoked: request.params.subject, ...await service.revokeUser(request.params.subject) }
  })
}
