import type { SubagentCli } from '../../core/config.js'

/** The settings model resolution reads (docs/contract.md#model-resolution); empty strings count as unset. */
export interface ModelSettings {
  SUB_AGENT_DEFAULT_MODEL: string
  CODEX_SUB_AGENT_DEFAULT_MODEL: string
  CODEX_MODEL: string
  OPENCODE_SUB_AGENT_DEFAULT_MODEL: string
  OPENCODE_MODEL: string
  ANTHROPIC_DEFAULT_SONNET_MODEL: string
  ANTHROPIC_DEFAULT_OPUS_MODEL: string
  ANTHROPIC_DEFAULT_HAIKU_MODEL: string
}

export type ModelResult = { ok: true, model: string, display: string } | { ok: false, error: string }

const ALIASES = ['sonnet', 'opus', 'haiku'] as const
type Alias = typeof ALIASES[number]
const isAlias = (m: string): m is Alias => (ALIASES as readonly string[]).includes(m.toLowerCase())

const first = (...values: string[]): string | undefined => values.map(v => v.trim()).find(v => v !== '')

/**
 * The one resolver of sub-agent models: the requested model (trimmed; aliases case-insensitive) or,
 * when empty, the CLI's default chain. /api/runtime/cli reports exactly what it returns for ''.
 */
export function resolveModel (cli: SubagentCli, requested: string, s: ModelSettings): ModelResult {
  const asked = requested.trim()
  if (cli === 'claude') {
    const model = asked !== '' ? asked : (first(s.SUB_AGENT_DEFAULT_MODEL) ?? 'sonnet')
    if (!isAlias(model)) return { ok: true, model, display: model }
    const alias = model.toLowerCase() as Alias
    const ids: Record<Alias, string> = {
      sonnet: first(s.ANTHROPIC_DEFAULT_SONNET_MODEL) ?? 'claude-sonnet-4-6',
      opus: first(s.ANTHROPIC_DEFAULT_OPUS_MODEL) ?? 'claude-opus-4-6',
      haiku: first(s.ANTHROPIC_DEFAULT_HAIKU_MODEL) ?? 'claude-haiku-4-5'
    }
    return { ok: true, model: ids[alias], display: alias }
  }
  if (cli === 'codex') {
    const model = asked !== '' ? asked : (first(s.CODEX_SUB_AGENT_DEFAULT_MODEL, s.CODEX_MODEL, s.SUB_AGENT_DEFAULT_MODEL) ?? 'gpt-5-codex')
    if (isAlias(model)) {
      return { ok: false, error: `'${model}' is a Claude-only model alias and the sub-agent CLI is codex; pass a codex model id or set CODEX_SUB_AGENT_DEFAULT_MODEL` }
    }
    return { ok: true, model, display: model }
  }
  const model = asked !== '' ? asked : (first(s.OPENCODE_SUB_AGENT_DEFAULT_MODEL, s.OPENCODE_MODEL, s.SUB_AGENT_DEFAULT_MODEL) ?? 'anthropic/claude-sonnet-4-6')
  if (isAlias(model)) {
    const alias = model.toLowerCase() as Alias
    const ids: Record<Alias, string> = { sonnet: 'anthropic/claude-sonnet-4-6', opus: 'anthropic/claude-opus-4-6', haiku: 'anthropic/claude-haiku-4-5' }
    return { ok: true, model: ids[alias], display: alias }
  }
  return { ok: true, model, display: model }
}
