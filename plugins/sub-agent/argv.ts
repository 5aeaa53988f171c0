import type { SubagentCli } from '../../core/config.js'

/*
 * The argv of each CLI (docs/contract.md#sub-agent-execution), pure. argv is written to the run directory and
 * exec'd by bash from there, so no value is ever interpolated into shell text. Deviations forced by
 * the pinned CLI versions (sandbox-image/sub-agent): codex 0.171 has no --full-auto and its own
 * command sandbox (bubblewrap) cannot start in a sandbox without capabilities, so it runs with
 * `--sandbox danger-full-access` and approvals `never` (the container is the sandbox; the forbidden
 * --dangerously-bypass-approvals-and-sandbox is never passed); codex sessions are persisted (no
 * --ephemeral) so they can be resumed; opencode 1.18 spells --dangerously-skip-permissions `--auto`.
 */

export interface RunSpec {
  cli: SubagentCli
  /** The caller's task (new run: with the system prompt; resume: the follow-up). */
  task: string
  system: string
  /** Resolved model id (docs/contract.md#model-resolution). */
  model: string
  maxTurns: number
  workingDirectory: string
  runDir: string
  resumeSessionId?: string
  /** claude: --mcp-config file when X-Mcp-Servers named servers (docs/contract.md#sub-agent-mcp-servers). */
  mcpConfigPath?: string
  /** codex: profile layered from CODEX_CONFIG_EXTRA. */
  codexProfile?: string
  /** codex: OPENAI_BASE_URL, which codex 0.171 reads only from its config. */
  openaiBaseUrl?: string
}

export interface Invocation {
  argv: string[]
  /** What the CLI reads on stdin ('' = immediate EOF). */
  stdin: string
  /** True when the prompt went through stdin instead of argv. */
  promptOnStdin: boolean
}

/** Above this many bytes of argv the prompt goes through stdin (docs/contract.md#sub-agent-execution; Linux caps one argument at 128 KiB). */
export const MAX_ARGV_BYTES = 100 * 1024

export const lastMessagePath = (runDir: string): string => `${runDir}/last_message.txt`

/** TOML basic string (JSON escapes are valid TOML for every character JSON.stringify emits). */
const toml = (s: string): string => JSON.stringify(s)

const argvBytes = (argv: string[]): number => argv.reduce((n, a) => n + Buffer.byteLength(a, 'utf8') + 1, 0)

/** NUL cannot be passed in argv (the run directory's argv file is NUL-separated). */
const noNul = (s: string): string => s.replace(/\0/g, '')

/** The prompt text a CLI gets: codex and opencode take the system prompt in front of the task (docs/contract.md#sub-agent-execution). */
export function promptText (spec: RunSpec): string {
  if (spec.cli === 'claude' || spec.resumeSessionId !== undefined) return noNul(spec.task)
  return noNul(`${spec.system}\n\n---\n\n${spec.task}`)
}

/*
 * Each builder places the prompt itself (undefined when it goes through stdin). claude takes it right
 * after -p, as --mcp-config and --disallowedTools are variadic and would swallow a trailing prompt.
 */
function claude (spec: RunSpec, prompt: string | undefined): string[] {
  const head = ['claude', '-p', ...(prompt !== undefined ? [prompt] : [])]
  const common = ['--max-turns', String(spec.maxTurns), '--permission-mode', 'bypassPermissions',
    '--disallowedTools', 'AskUserQuestion,ExitPlanMode', '--output-format', 'stream-json', '--verbose',
    ...(spec.mcpConfigPath !== undefined ? ['--mcp-config', spec.mcpConfigPath] : [])]
  if (spec.resumeSessionId !== undefined) return [...head, '--resume', spec.resumeSessionId, ...common]
  return [...head, '--model', spec.model, '--append-system-prompt', noNul(spec.system), ...common]
}

function codex (spec: RunSpec, prompt: string | undefined): string[] {
  const config = ['-c', 'approval_policy="never"', '-c', 'check_for_update_on_startup=false',
    ...(spec.openaiBaseUrl !== undefined ? ['-c', `openai_base_url=${toml(spec.openaiBaseUrl)}`] : [])]
  const profile = spec.codexProfile !== undefined ? ['-p', spec.codexProfile] : []
  const tail = ['--json', '--skip-git-repo-check', '--model', spec.model, '--output-last-message', lastMessagePath(spec.runDir), prompt ?? '-']
  if (spec.resumeSessionId !== undefined) {
    return ['codex', 'exec', ...profile, 'resume', spec.resumeSessionId, ...config, '-c', 'sandbox_mode="danger-full-access"', ...tail]
  }
  return ['codex', 'exec', ...profile, ...config, '--sandbox', 'danger-full-access', '--cd', spec.workingDirectory, ...tail]
}

function opencode (spec: RunSpec, prompt: string | undefined): string[] {
  return ['opencode', 'run', ...(spec.resumeSessionId !== undefined ? ['--session', spec.resumeSessionId] : []),
    '--model', spec.model, '--format', 'json', '--auto', ...(prompt !== undefined ? [prompt] : [])]
}

const BUILDERS: Record<SubagentCli, (spec: RunSpec, prompt: string | undefined) => string[]> = { claude, codex, opencode }

/**
 * argv plus stdin. The prompt goes through stdin instead of argv when argv would pass 100 KiB, or when
 * it starts with `-` (it would read as an option): codex then gets `-` as its prompt, claude and
 * opencode read stdin when no prompt argument is given.
 */
export function buildInvocation (spec: RunSpec): Invocation {
  const prompt = promptText(spec)
  const inline = BUILDERS[spec.cli](spec, prompt)
  if (argvBytes(inline) <= MAX_ARGV_BYTES && !prompt.startsWith('-')) return { argv: inline, stdin: '', promptOnStdin: false }
  return { argv: BUILDERS[spec.cli](spec, undefined), stdin: prompt, promptOnStdin: true }
}
