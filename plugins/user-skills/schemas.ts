import Type, { type Static } from 'typebox'

/** Options of the user-skills plugin (docs/contract.md#skills, docs/contract.md#routes-and-settings). */
export const UserSkillsOptions = Type.Object({
  tokensUrl: Type.Optional(Type.String({ default: '', description: 'MCP_TOKENS_URL; empty = no settings service unless an authenticated request brings an allowed header pair' })),
  tokensApiKey: Type.Optional(Type.String({ default: '', description: 'MCP_TOKENS_API_KEY, sent as X-Internal-Api-Key' })),
  tokensUrlAllow: Type.Optional(Type.Array(Type.String(), { default: [], description: 'MCP_TOKENS_URL_ALLOW: origins an authenticated request\'s X-Mcp-Tokens-Url may point at, besides MCP_TOKENS_URL\'s own' })),
  cacheMaxBytes: Type.Optional(Type.Integer({ default: 1073741824, minimum: 1, description: 'SKILLS_CACHE_MAX_BYTES: total size of extracted skills and cached configurations; least recently used removed first' })),
  cacheDir: Type.Optional(Type.String({ default: '/data/skills-cache', minLength: 1, description: 'SKILLS_CACHE_DIR (server view)' })),
  cacheHostDir: Type.Optional(Type.String({ default: '', description: 'SKILLS_CACHE_HOST_PATH (daemon view); empty = cacheDir' })),
  memoryTtlMs: Type.Optional(Type.Integer({ default: 60000, minimum: 1, description: 'How long a fetched configuration is used without asking again' })),
  requestTimeoutMs: Type.Optional(Type.Integer({ default: 5000, minimum: 1, description: 'Timeout of one configuration request (docs/contract.md#skills)' })),
  waitMs: Type.Optional(Type.Integer({ default: 1500, minimum: 0, description: 'How long a prompt render or tool call waits for the configuration before using the disk copy or the defaults' })),
  failureTtlMs: Type.Optional(Type.Integer({ default: 15000, minimum: 0, description: 'After a failed request, the fallback is used without asking again for this long (no stall while the service is down)' })),
  downloadTimeoutMs: Type.Optional(Type.Integer({ default: 30000, minimum: 1, description: 'Timeout of one ZIP download (docs/contract.md#skills)' })),
  maxZipBytes: Type.Optional(Type.Integer({ default: 52428800, minimum: 1, description: 'Largest ZIP downloaded (50 MiB)' })),
  maxExtractBytes: Type.Optional(Type.Integer({ default: 209715200, minimum: 1, description: 'Largest total uncompressed size of one skill' })),
  maxEntries: Type.Optional(Type.Integer({ default: 5000, minimum: 1, description: 'Most entries in one skill ZIP' })),
  maxConcurrentDownloads: Type.Optional(Type.Integer({ default: 2, minimum: 1, description: 'Downloads running at once across users' })),
  mountWaitMs: Type.Optional(Type.Integer({ default: 3000, minimum: 0, description: 'How long a sandbox creation waits for the user\'s pending downloads' })),
  refusedRetryMs: Type.Optional(Type.Integer({ default: 600000, minimum: 0, description: 'A refused or failed ZIP (bad hash, unsafe entry) is not fetched again for this long' })),
  maxConfigBytes: Type.Optional(Type.Integer({ default: 1048576, minimum: 1024, description: 'Largest configuration answer read' })),
  maxUsers: Type.Optional(Type.Integer({ default: 10000, minimum: 1, description: 'Configurations kept in memory' }))
})
export type UserSkillsOptions = Static<typeof UserSkillsOptions>

const Name = Type.String({ maxLength: 256 })

/** One entry of `enabled_skills` as the settings service sends it; checked item by item, extra keys ignored. */
export const EnabledSkill = Type.Object({
  name: Name,
  description: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  category: Type.String({ maxLength: 32 }),
  skill_path: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  zip_sha256: Type.Optional(Type.Union([Type.String(), Type.Null()]))
})
export type EnabledSkill = Static<typeof EnabledSkill>
