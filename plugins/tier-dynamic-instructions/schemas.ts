import Type, { type Static } from 'typebox'

/** Asked before tier 3 (priority 10). */
export const DYNAMIC_PRIORITY = 100

export const TierDynamicInstructionsOptions = Type.Object({
  maxBytes: Type.Optional(Type.Integer({ default: 32768, minimum: 1024, description: 'Cap of the instructions in UTF-8 bytes' }))
})
export type TierDynamicInstructionsOptions = Static<typeof TierDynamicInstructionsOptions>
