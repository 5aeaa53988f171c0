import type { SubagentCli } from '../../core/config.js'

/*
 * What the server knows about each sub-agent CLI: how it is named on a command line, and how it is
 * presented, and which image has it: the sandbox image installs claude and opencode under /usr/local/bin
 * in every target; codex only in the agents and full targets (sandbox-image/README.md, docs/contract.md#skills).
 */

export interface CliInfo {
  /** Name in tool descriptions and prompts. */
  title: string
  /** Executable on PATH inside the sandbox. */
  bin: string
  /** npm packages whose scripts a runtime (node, bun) may run as the CLI. */
  packages: readonly string[]
  /** Whether the CLI reports its cost (docs/contract.md#runtime-cli-endpoint supports_cost; docs/contract.md#sub-agent-result cost field). */
  reportsCost: boolean
  /** Whether the default (slim) sandbox image has it; otherwise only the agents and full targets do. */
  inSlim: boolean
}

export const CLIS: Record<SubagentCli, CliInfo> = {
  claude: { title: 'Claude Code', bin: 'claude', packages: ['@anthropic-ai/claude-code'], reportsCost: true, inSlim: true },
  codex: { title: 'OpenAI Codex CLI', bin: 'codex', packages: ['@openai/codex'], reportsCost: false, inSlim: false },
  opencode: { title: 'opencode', bin: 'opencode', packages: ['opencode-ai'], reportsCost: true, inSlim: true }
}

/** What a server whose DOCKER_IMAGE lacks the CLI should do: name the image target that has it. */
export function missingCliHint (cli: SubagentCli): string {
  const { bin } = CLIS[cli]
  if (CLIS[cli].inSlim) {
    return `every target of sandbox-image/build.sh (slim, agents, full) installs \`${bin}\`: rebuild the image DOCKER_IMAGE names with \`bash sandbox-image/build.sh\``
  }
  return `\`${bin}\` is not in the default slim image; it is in the agents image (slim + ${bin}) and the full image: ` +
    'build it with `bash sandbox-image/build.sh --target agents --tag computer-use-sandbox:agents` and set DOCKER_IMAGE=computer-use-sandbox:agents, ' +
    'or choose SUBAGENT_CLI=claude or opencode'
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
