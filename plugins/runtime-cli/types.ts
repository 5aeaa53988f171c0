import type { SubagentCli } from '../../core/config.js'
import type { ModelResult } from './model.js'

/**
 * The active sub-agent CLI and its one model resolver (docs/contract.md#sub-agent-cli-selection, docs/contract.md#model-resolution), shared by
 * GET /api/runtime/cli and the sub_agent tool so both always report and use the same model.
 */
export interface RuntimeCliService {
  /** SUBAGENT_CLI after validation. */
  readonly cli: SubagentCli
  /** What an empty `model` resolves to (the value /api/runtime/cli reports); undefined when that is an error. */
  readonly defaultModel: string | undefined
  /**
   * Resolves a requested model (trimmed; aliases sonnet/opus/haiku case-insensitive) or, when empty,
   * the CLI's default chain. `display` is the alias when one was used, else the id. A Claude alias
   * under codex is `{ ok: false }` with a message naming CODEX_SUB_AGENT_DEFAULT_MODEL.
   */
  resolveModel (requested: string): ModelResult
}

export type { ModelResult }

declare module 'fastify' {
  interface FastifyInstance { runtimeCli: RuntimeCliService }
}
