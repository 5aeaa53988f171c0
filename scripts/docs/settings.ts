/*
 * docs/settings.md, rendered from the config schema (core/config.ts ConfigSchema): every variable with
 * its type, default and description, grouped. The schema is the one place a setting is written down;
 * this file only lays it out. test/core/docs.test.ts fails when the committed page differs.
 */
import { ConfigSchema } from '../../core/config.js'
import { anchor, cell, GENERATED_NOTE } from './markdown.js'

interface Setting {
  type?: string
  default?: unknown
  description?: string
  minimum?: number
  maximum?: number
  exclusiveMinimum?: number
  anyOf?: Array<{ const?: unknown }>
  'x-kind'?: string
}

/**
 * Each group starts at the variable named here and runs, in schema order, to the next group's first
 * variable: a setting added to the schema lands in the group of its neighbours.
 */
export const GROUPS: Array<[title: string, first: string]> = [
  ['Listening and access', 'PORT'],
  ['Data and the Docker engine', 'DATA_DIR'],
  ['Sandboxes', 'SANDBOX_PREFIX'],
  ['Network and egress', 'ENABLE_NETWORK'],
  ['Sandbox resources and lifecycle', 'CONTAINER_MEM_LIMIT'],
  ['Tool calls and size limits', 'COMMAND_TIMEOUT'],
  ['Live browser and web terminal', 'CDP_PORT'],
  ['Sub-agent', 'SUBAGENT_CLI'],
  ['Skills and the settings service', 'MCP_TOKENS_URL'],
  ['Logging', 'LOG_LEVEL'],
  ['Proxies and request timeouts', 'TRUST_PROXY'],
  ['OAuth (Claude by URL)', 'OAUTH_ENABLED'],
  ['Shutdown', 'CLOSE_GRACE_MS']
]

const INTRO = `Every setting is an environment variable, validated at boot: a bad value stops the server with a
\`FATAL\` line naming it. Booleans accept \`true/false/1/0/yes/no\`; sizes are bytes or a number with
\`k\`, \`m\`, \`g\` (binary multiples); an empty numeric or boolean value counts as unset.

Three settings decide who can reach the server. \`MCP_API_KEY\` (and \`LINK_SIGNING_KEY\`, when set)
must be at least 32 characters: capability tokens the model sees are signed with a key derived
from them, and a short key could be guessed offline from any token. Without \`MCP_API_KEY\` (open
mode) the server listens on \`127.0.0.1\` only unless \`HOST\` says otherwise, and the boot log says
so. Behind a reverse proxy set \`TRUST_PROXY\` to its hop count or address, so that failed-login
throttling (30 failures a minute per address, then 429 with \`Retry-After\`; a valid key or token
is never refused) counts real clients instead of the proxy.

Plugins take further options in \`fastify.config.ts\`; their defaults and meanings are in each
plugin's \`schemas.ts\` (the browser, terminal and file-route options are described in
[features.md](features.md)).`

/** `integer ≥ 60`, `size`, `one of: open, allowlist, off` … */
export function typeOf (s: Setting): string {
  if (s.anyOf !== undefined) return `one of: ${s.anyOf.map(x => `\`${String(x.const)}\``).join(', ')}`
  const base = s['x-kind'] === 'size' ? 'size' : s.type ?? 'string'
  const bounds: string[] = []
  if (s.minimum !== undefined && s.minimum > 0) bounds.push(`≥ ${s.minimum}`)
  if (s.exclusiveMinimum !== undefined) bounds.push(`> ${s.exclusiveMinimum}`)
  if (s.maximum !== undefined) bounds.push(`≤ ${s.maximum}`)
  return [base, ...bounds].join(' ')
}

const shown = (value: unknown): string => value === '' || value === undefined ? '(empty)' : `\`${String(value)}\``

/** The whole page. Throws when a setting has no description or a group names an unknown variable. */
export function settingsDoc (): string {
  const props = ConfigSchema.properties as unknown as Record<string, Setting>
  const names = Object.keys(props)
  const starts = GROUPS.map(([title, first]) => {
    const at = names.indexOf(first)
    if (at < 0) throw new Error(`settings group "${title}" starts at ${first}, which is not in the config schema`)
    return at
  })
  if (starts[0] !== 0 || starts.some((at, i) => i > 0 && at <= (starts[i - 1] as number))) throw new Error('settings groups are out of schema order')
  const out = [GENERATED_NOTE('the config schema in `core/config.ts` (`ConfigSchema`)'), '# Settings', '', INTRO, '']
  out.push(GROUPS.map(([title]) => `[${title}](#${anchor(title)})`).join(' · '), '')
  GROUPS.forEach(([title], i) => {
    out.push(`## ${title}`, '', '| Variable | Type | Default | Meaning |', '|---|---|---|---|')
    for (const name of names.slice(starts[i], starts[i + 1])) {
      const s = props[name] as Setting
      if (s.description === undefined || s.description.trim() === '') throw new Error(`${name} has no description in the config schema`)
      out.push(`| \`${name}\` | ${cell(typeOf(s))} | ${cell(shown(s.default))} | ${cell(s.description)} |`)
    }
    out.push('')
  })
  return out.join('\n')
}
