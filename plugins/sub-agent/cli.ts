import type { SubagentCli } from '../../core/config.js'

/*
 * What the server knows about each sub-agent CLI: how it is named on a command line, and how it is
 * presented. The image installs the three under /usr/local/bin (sandbox-image/sub-agent).
 */

export interface CliInfo {
  /** Name in tool descriptions and prompts. */
  title: string
  /** Executable on PATH inside the sandbox. */
  bin: string
  /** npm packages whose scripts a runtime (node, bun) may run as the CLI. */
  packages: readonly string[]
  /** Whether the CLI reports its cost (§8.8 supports_cost; §8.5 cost field). */
  reportsCost: boolean
}

export const CLIS: Record<SubagentCli, CliInfo> = {
  claude: { title: 'Claude Code', bin: 'claude', packages: ['@anthropic-ai/claude-code'], reportsCost: true },
  codex: { title: 'OpenAI Codex CLI', bin: 'codex', packages: ['@openai/codex'], reportsCost: false },
  opencode: { title: 'opencode', bin: 'opencode', packages: ['opencode-ai'], reportsCost: true }
}

const RUNTIMES = new Set(['node', 'nodejs', 'bun', 'deno'])
const baseName = (path: string): string => path.slice(path.lastIndexOf('/') + 1)

/**
 * True when a command line (ps `args`) is the CLI itself: `claude …`, `/opt/…/codex …`, or a runtime
 * running the CLI's launcher or package script (`node /usr/local/bin/codex …`,
 * `node …/node_modules/@openai/codex/bin/codex.js …`). Children the CLI starts (bash, git …) are not,
 * and neither is a runtime running some other script of that name (`node ./claude.js`).
 */
export function isCliCommand (cli: SubagentCli, cmdline: string): boolean {
  const { bin, packages } = CLIS[cli]
  const [first = '', second = ''] = cmdline.trim().split(' ', 2)
  if (baseName(first) === bin) return true
  if (!RUNTIMES.has(baseName(first))) return false
  const script = baseName(second)
  return script === bin || packages.some(p => second.includes(`/node_modules/${p}/`))
}
