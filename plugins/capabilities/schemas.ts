import Type, { type Static } from 'typebox'

export const CapabilitiesOptions = Type.Object({
  apiKey: Type.Optional(Type.String({ default: '', description: 'MCP_API_KEY; empty = open mode, no tokens' })),
  signingKey: Type.Optional(Type.String({ default: '', description: 'LINK_SIGNING_KEY; empty = derived from apiKey' })),
  tokenTtlSeconds: Type.Optional(Type.Integer({ default: 2592000, minimum: 60 })),
  publicBaseUrl: Type.String({ description: 'PUBLIC_BASE_URL without trailing slash' })
})
export type CapabilitiesOptions = Static<typeof CapabilitiesOptions>
