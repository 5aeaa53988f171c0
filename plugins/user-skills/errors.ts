import { createError } from '@fastify/error'

/** The settings service did not give a usable answer (status, timeout, size, JSON shape). Logged, never sent to clients. */
export const USER_SKILLS_SERVICE_FAILED = createError('USER_SKILLS_SERVICE_FAILED', 'Settings service request failed: %s', 502)
/** A user skill ZIP was not taken: download failure, hash mismatch or an unsafe entry. Nothing of it was extracted. */
export const USER_SKILLS_ZIP_REFUSED = createError('USER_SKILLS_ZIP_REFUSED', 'User skill ZIP refused: %s', 422)
