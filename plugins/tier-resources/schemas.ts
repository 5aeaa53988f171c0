import Type, { type Static } from 'typebox'

export const TierResourcesOptions = Type.Object({
  maxReadBytes: Type.Optional(Type.Integer({ default: 10485760, minimum: 1, description: 'RESOURCE_READ_MAX_BYTES' })),
  maxSkillManifests: Type.Optional(Type.Integer({ default: 512, minimum: 1, description: 'Most skill manifests (file digests, docs/contract.md#skills-extension) kept, for 60 s each' })),
  maxSkillWatchers: Type.Optional(Type.Integer({ default: 10000, minimum: 1, description: 'Most chats remembered for skill list_changed notifications' }))
})
export type TierResourcesOptions = Static<typeof TierResourcesOptions>
