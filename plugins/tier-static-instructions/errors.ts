import { createError } from '@fastify/error'

export const TIER_STATIC_BAD_TEXT = createError('TIER_STATIC_BAD_TEXT', 'tier-static-instructions: %s', 500, TypeError)
