import type { RequestUser } from '../../core/identity.js'
import type { EnvContributor } from './types.js'

/*
 * What enters a sandbox's own environment (docs/architecture.md#security-model, docs/engine.md#environment): the
 * per-chat variables (below) and what the plugins that own them contribute (EnvContributor: the egress
 * proxy settings, SUBAGENT_CLI). Names a contributor withholds (the sub-agent's provider credentials)
 * never enter it: they travel only in the environment of the execs that need them (a `sub_agent` run's).
 * A container's environment, and so PID 1, the in-sandbox agent, bash_tool commands and terminal shells,
 * is readable by any code the model runs. Server secrets are dropped at every layer.
 */

/** Server secrets that never enter a sandbox, whatever a caller passes. */
export const NEVER_IN_SANDBOX: readonly string[] = ['MCP_API_KEY', 'LINK_SIGNING_KEY', 'MCP_TOKENS_API_KEY']

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

/** Checks a contributor when it registers: names are plain identifiers, never a server secret or CHAT_ID. */
export function checkContributor (c: EnvContributor): void {
  for (const name of [...c.names, ...(c.withheld ?? [])]) {
    if (typeof name !== 'string' || !NAME.test(name) || NEVER_IN_SANDBOX.includes(name) || name === 'CHAT_ID') {
      throw new TypeError(`sandbox: an environment contributor may not manage ${JSON.stringify(name)}`)
    }
  }
  if (typeof c.env !== 'function') throw new TypeError('sandbox: an environment contributor needs env()')
}

/** The contributors' variables now, each limited to the names it manages (later contributors win). */
export function contributedEnv (contributors: readonly EnvContributor[]): Record<string, string> {
  const env: Record<string, string> = {}
  for (const c of contributors) {
    const answer = c.env()
    for (const name of c.names) {
      const value = answer[name]
      if (typeof value === 'string') env[name] = value
    }
  }
  return env
}

/** Names no layer may put in a sandbox's own environment. */
export function withheldNames (contributors: readonly EnvContributor[]): ReadonlySet<string> {
  return new Set(contributors.flatMap(c => c.withheld ?? []))
}

/** Names drift detection compares: the per-chat CHAT_ID, every contributor's names and withheld names. */
export function managedNames (contributors: readonly EnvContributor[]): ReadonlySet<string> {
  return new Set(['CHAT_ID', ...contributors.flatMap(c => [...c.names, ...(c.withheld ?? [])])])
}

/** The per-chat variables of docs/contract.md#sandbox-layout: identity, git author/committer and GitLab when known. */
export function chatEnv (chatId: string, user: RequestUser | undefined): Record<string, string> {
  const env: Record<string, string> = { CHAT_ID: chatId }
  if (user?.name !== undefined && user.name !== '') {
    env.GIT_AUTHOR_NAME = user.name
    env.GIT_COMMITTER_NAME = user.name
  }
  if (user?.email !== undefined && user.email !== '') {
    env.GIT_AUTHOR_EMAIL = user.email
    env.GIT_COMMITTER_EMAIL = user.email
  }
  const token = user?.credentials.gitlabToken
  if (token !== undefined && token !== '') {
    env.GITLAB_TOKEN = token
    env.GITLAB_HOST = user?.credentials.gitlabHost ?? 'gitlab.com'
  } else if (user?.credentials.gitlabHost !== undefined) {
    env.GITLAB_HOST = user.credentials.gitlabHost
  }
  return env
}

/**
 * Merges environment layers into the engine contract's `KEY=value` list: later layers win, empty values and the
 * server's secrets are dropped, names must be plain identifiers.
 */
export function toEnvList (...layers: Array<Record<string, string> | undefined>): string[] {
  const merged = new Map<string, string>()
  for (const layer of layers) {
    if (layer === undefined) continue
    for (const [name, value] of Object.entries(layer)) {
      if (!NAME.test(name) || NEVER_IN_SANDBOX.includes(name)) continue
      if (typeof value !== 'string' || value === '') { merged.delete(name); continue }
      merged.set(name, value)
    }
  }
  return [...merged].map(([name, value]) => `${name}=${value}`)
}

/** toEnvList for a container's own environment: withheld names (withheldNames) are dropped from every layer. */
export function containerEnvList (withheld: ReadonlySet<string>, ...layers: Array<Record<string, string> | undefined>): string[] {
  return toEnvList(...layers).filter(item => !withheld.has(item.slice(0, item.indexOf('='))))
}
