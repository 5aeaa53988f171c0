import { defineError, INTERNAL_ERROR } from '../../core/errors.js'

export const PROMPT_SKILLS_DIR_MISSING = defineError('PROMPT_SKILLS_DIR_MISSING', INTERNAL_ERROR, "Skills directory '%s' does not exist or is not a directory", 500, TypeError)
