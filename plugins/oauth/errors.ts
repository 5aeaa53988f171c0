import { createError } from '@fastify/error'

export const OAUTH_UPSTREAM_FAILED = createError('OAUTH_UPSTREAM_FAILED', 'Sign-in through the OpenID Connect provider failed (%s)', 502)
export const OAUTH_UPSTREAM_REFUSED = createError('OAUTH_UPSTREAM_REFUSED', '%s', 403)
export const OAUTH_UNKNOWN_USER = createError('OAUTH_UNKNOWN_USER', "No OAuth user '%s'", 404)
