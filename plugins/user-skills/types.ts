import type { RequestCredentials } from '../../core/identity.js'

/**
 * Who asks for skills: the validated email of docs/contract.md#request-headers and the request's credentials, of which only the
 * settings-service pair (`mcpTokensUrl` + `mcpTokensApiKey`, X-Mcp-Tokens-Url / -Api-Key) is used,
 * and only for an authenticated caller (`mcpTokensCaller`) and an allowed origin (settings-source.ts).
 */
export interface SkillUser {
  email?: string
  credentials?: RequestCredentials
}

/** A user ZIP skill that is downloaded, verified against its zip_sha256 and extracted. */
export interface UserSkill {
  /** Its directory under /mnt/skills/user (the settings service's `name`, ^[a-z0-9][a-z0-9-]{0,63}$). */
  name: string
  /** The front matter description of its SKILL.md, collapsed to one line. */
  description: string
  /** The verified SHA-256 of the ZIP (lowercase hex); the extracted tree is stored under it. */
  sha256: string
  /** The extracted skill on the server (SKILL.md at its top). Never handed to clients. */
  dir: string
  /** The same directory as the Docker daemon sees it (the bind-mount source). */
  hostDir: string
}

/** Where a user's skill configuration came from this time. */
export type SkillSetOrigin = 'service' | 'memory' | 'disk' | 'defaults'

/** A user's skills as the settings service enabled them (docs/contract.md#skills). */
export interface UserSkillSet {
  origin: SkillSetOrigin
  /** Built-in skills enabled by name; missing default public skills are added by the consumer anyway. */
  enabled: { public: string[], examples: string[] }
  /** User ZIP skills ready to mount, alphabetical by name. */
  ready: UserSkill[]
  /** Names of enabled user skills not ready (still downloading, or refused: see the log). */
  pending: string[]
}

/** A read-only bind mount of one ready user skill. */
export interface UserSkillMount { hostDir: string, target: string }

/** Told when the skill set of a user may have changed (new configuration, a download finished). */
export type SkillsChangedListener = (email: string) => void

/**
 * Per-user skills from the settings service (MCP_TOKENS_URL): configuration cached in memory (60 s),
 * then on disk, then the defaults; user ZIP skills downloaded off the prompt path, verified, safely
 * extracted into a content-addressed cache of at most SKILLS_CACHE_MAX_BYTES (least recently used
 * entries removed first). No method throws: failures degrade to the defaults with one warning, and
 * every wait is bounded.
 */
export interface UserSkillsService {
  /**
   * The user's skill set. Waits at most `waitMs` (plugin option) for the settings service; starts the
   * download of every enabled user skill that is not cached yet and does not wait for it (the
   * listeners hear when it is ready). Without an email or a settings service: the defaults.
   */
  forUser (who: SkillUser): Promise<UserSkillSet>
  /**
   * Like forUser, but never downloads, and answers from the configuration already known (memory,
   * then disk) when the service is slow: for GET /skill-mounts (docs/contract.md#skills).
   */
  cached (who: SkillUser): Promise<UserSkillSet>
  /**
   * The bind mounts of a new sandbox of this user: waits up to `mountWaitMs` for downloads of the
   * user's enabled skills, then mounts the ready ones at /mnt/skills/user/<name>. With a chat, the
   * skills handed out are held against cache eviction until `release(chatId)` (its sandbox stopped)
   * or the chat's next mounts(); without one, only during the call.
   */
  mounts (who: SkillUser, chatId?: string): Promise<UserSkillMount[]>
  /** Lets go of the skills held for a chat's sandbox (it stopped or was removed). Idempotent. */
  release (chatId: string): void
  /** Register while plugins load. */
  onChange (listener: SkillsChangedListener): void
  /** Aborts downloads and requests in flight and waits for them (onClose); their files are removed. */
  close (): Promise<void>
}

declare module 'fastify' {
  interface FastifyInstance { userSkills: UserSkillsService }
}
