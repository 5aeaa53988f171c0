import Type, { type Static } from 'typebox'

export const TierHttpOptions = Type.Object({
  singleUserMode: Type.Optional(Type.Union([Type.Literal('lenient'), Type.Literal('true'), Type.Literal('false')], { default: 'lenient' }))
})
export type TierHttpOptions = Static<typeof TierHttpOptions>

/**
 * Query parameters as Fastify parses them (a repeated key becomes an array). They are read leniently on
 * purpose: unknown parameters (e.g. `archive_url`, `format`) are accepted and ignored (§4.4, §8.1).
 */
export type LooseQuery = Record<string, string | string[] | undefined>
