import Type, { type Static } from 'typebox'

export const TierHttpOptions = Type.Object({
  singleUserMode: Type.Optional(Type.Union([Type.Literal('lenient'), Type.Literal('true'), Type.Literal('false')], { default: 'lenient' }))
})
export type TierHttpOptions = Static<typeof TierHttpOptions>

/**
 * Query parameters as Fastify parses them (a repeated key becomes an array). They are read leniently on
 * purpose: unknown parameters (e.g. `archive_url`, `format`) are accepted and ignored (docs/contract.md#tier-6-get-system-prompt, docs/contract.md#skills).
 */
export type LooseQuery = Record<string, string | string[] | undefined>

const email = Type.Optional(Type.String({ description: 'the user\'s email (X-User-Email wins); an invalid one counts as absent' }))

/** GET /system-prompt: without a chat, the legacy template with its `{file_base_url}` placeholders (docs/contract.md#tier-6-get-system-prompt). */
export const SystemPromptQuery = Type.Object({
  chat_id: Type.Optional(Type.String({ description: 'the chat (docs/contract.md#chat-id-validation), when no X-Chat-Id header names it; needs the API key' })),
  file_base_url: Type.Optional(Type.String({ description: 'legacy: a files base URL whose last segment is the chat id' })),
  user_email: email
}, { additionalProperties: true, description: 'unknown parameters (e.g. archive_url) are accepted and ignored' })

/** GET /skill-list and /skill-mounts. */
export const SkillQuery = Type.Object({
  user_email: email,
  format: Type.Optional(Type.String({ description: 'accepted for compatibility; no effect' }))
}, { additionalProperties: true })

export const UserHeaders = Type.Object({
  'x-chat-id': Type.Optional(Type.String({ description: 'the chat (alias X-OpenWebUI-Chat-Id); wins over chat_id' })),
  'x-user-email': Type.Optional(Type.String({ description: 'the user\'s email (alias X-OpenWebUI-User-Email)' }))
})

export const SkillMountsReply = Type.Record(Type.String({ description: 'host directory of a cached user skill' }), Type.Object({
  bind: Type.String({ description: 'mount point inside the sandbox' }),
  mode: Type.Literal('ro')
}))
