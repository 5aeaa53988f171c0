import { defineError, INTERNAL_ERROR } from '../../core/errors.js'

export const TIER_STATIC_BAD_TEXT = defineError('TIER_STATIC_BAD_TEXT', INTERNAL_ERROR, 'tier-static-instructions: %s', 500, TypeError)
