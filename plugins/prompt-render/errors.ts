import { createError } from '@fastify/error'

export const PROMPT_SKILLS_DIR_MISSING = createError('PROMPT_SKILLS_DIR_MISSING', "Skills directory '%s' does not exist or is not a directory", 500, TypeError)
