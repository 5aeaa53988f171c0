import { defineError, INTERNAL_ERROR } from '../../core/errors.js'

/** The settings service did not give a usable answer (status, timeout, size, JSON shape). Logged, never sent to clients. */
export const USER_SKILLS_SERVICE_FAILED = defineError('USER_SKILLS_SERVICE_FAILED', INTERNAL_ERROR, 'Settings service request failed: %s', 502)
/** A user skill ZIP was not taken: download failure, hash mismatch or an unsafe entry. Nothing of it was extracted. */
export const USER_SKILLS_ZIP_REFUSED = defineError('USER_SKILLS_ZIP_REFUSED', 'zip_refused', 'User skill ZIP refused: %s', 422)
