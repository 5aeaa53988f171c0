import Type, { type Static } from 'typebox'

export const PromptRenderOptions = Type.Object({
  singleUserMode: Type.Optional(Type.Union([Type.Literal('lenient'), Type.Literal('true'), Type.Literal('false')], { default: 'lenient' })),
  skillsDir: Type.Optional(Type.String({ default: '', description: 'SKILLS_DIR; empty = the repository\'s sandbox-image/skills, which is what the image ships at /mnt/skills' })),
  includeExamples: Type.Optional(Type.Boolean({ default: false, description: 'SKILLS_INCLUDE_EXAMPLES' })),
  commandTimeoutSeconds: Type.Optional(Type.Integer({ default: 120, minimum: 1, description: 'COMMAND_TIMEOUT, quoted in the prompt' })),
  subagentCli: Type.Optional(Type.Union([Type.Literal('claude'), Type.Literal('codex'), Type.Literal('opencode')], { default: 'claude' })),
  networkEnabled: Type.Optional(Type.Boolean({ default: true, description: 'ENABLE_NETWORK, mentioned in the prompt' })),
  ttlMs: Type.Optional(Type.Integer({ default: 60000, minimum: 1, description: 'Render cache TTL (docs/contract.md#render-cache)' })),
  maxEntries: Type.Optional(Type.Integer({ default: 1000, minimum: 1, description: 'Render cache size (docs/contract.md#render-cache)' })),
  maxBytes: Type.Optional(Type.Integer({ default: 32768, minimum: 4096, description: 'Hard cap of one render in UTF-8 bytes; skills are dropped from the end to fit' }))
})
export type PromptRenderOptions = Static<typeof PromptRenderOptions>
