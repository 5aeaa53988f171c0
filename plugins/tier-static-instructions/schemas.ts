import Type, { type Static } from 'typebox'

/** Tier 3 answers after tier 4 (priority 100) when that one has nothing to say. */
export const STATIC_PRIORITY = 10

export const TierStaticInstructionsOptions = Type.Object({
  text: Type.Optional(Type.String({
    minLength: 1,
    maxLength: 2000,
    default: 'The tools of this server run in an isolated Linux sandbox that belongs to this chat. Before you start, read your full guide for this chat with the view tool: /home/assistant/README.md (file locations, public links for sharing files, available skills, tool tips). Files the user uploaded are listed by resources/list and can be read there or under /mnt/user-data/uploads.'
  }))
})
export type TierStaticInstructionsOptions = Static<typeof TierStaticInstructionsOptions>
