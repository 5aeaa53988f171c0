import { createError } from '@fastify/error'

/** 400: an override carries a rule the parser refuses (the message names each bad entry). */
export const EGRESS_BAD_RULE = createError('EGRESS_BAD_RULE', '%s', 400)
