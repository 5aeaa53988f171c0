import { defineError, INTERNAL_ERROR } from '../../core/errors.js'

export const OAUTH_UPSTREAM_FAILED = defineError('OAUTH_UPSTREAM_FAILED', INTERNAL_ERROR, 'Sign-in through the OpenID Connect provider failed (%s)', 502)
export const OAUTH_UPSTREAM_REFUSED = defineError('OAUTH_UPSTREAM_REFUSED', 'upstream_refused', '%s', 403)
export const OAUTH_UNKNOWN_USER = defineError('OAUTH_UNKNOWN_USER', 'unknown_user', "No OAuth user '%s'", 404)
