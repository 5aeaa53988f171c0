import { defineError } from '../../core/errors.js'

/** An override carries a rule the parser refuses (the message names each bad entry). */
export const EGRESS_BAD_RULE = defineError('EGRESS_BAD_RULE', 'bad_rule', '%s', 400)
/** The override, as stored, would exceed its size bound (the wire code is chat storage's, which clients saw first). */
export const EGRESS_OVERRIDE_TOO_LARGE = defineError('EGRESS_OVERRIDE_TOO_LARGE', 'storage_too_large',
  'the override is larger than %d bytes once stored; allow fewer or shorter rules', 413)
