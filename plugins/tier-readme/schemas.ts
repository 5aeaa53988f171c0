import Type, { type Static } from 'typebox'

export const TierReadmeOptions = Type.Object({
  path: Type.Optional(Type.String({ default: '/home/assistant/README.md', pattern: '^/[^\\u0000]+[^/]$' })),
  checkIntervalMs: Type.Optional(Type.Integer({ default: 60000, minimum: 0, description: 'At most one freshness check per chat in this window (the render cache TTL, docs/contract.md#tier-2-the-sandbox-readme)' })),
  maxChats: Type.Optional(Type.Integer({ default: 10000, minimum: 1, description: 'Chats whose last written README is remembered' }))
})
export type TierReadmeOptions = Static<typeof TierReadmeOptions>
